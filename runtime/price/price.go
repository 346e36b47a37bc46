// Package price turns the tokens a provider reports into US dollars. Prices
// are per model, in USD per million tokens of each kind; a model name matches
// the longest known name that prefixes it, so dated snapshots
// ("gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929") take their family's
// price.
//
// A price file overrides and extends the defaults:
//
//	{
//	  "models": {
//	    "gpt-4o": {"input": 2.5, "cacheRead": 1.25, "output": 10},
//	    "my-local-model": {"input": 0, "output": 0}
//	  }
//	}
//
// "input" and "output" are required; "cacheRead" and "cacheWrite" default to
// "input", the price of the same tokens had they not been cached.
package price

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/model"
)

// Price is what one model costs, in USD per million tokens of each kind.
type Price struct {
	Input      float64
	CacheRead  float64
	CacheWrite float64
	Output     float64
}

// Cost is what usage costs at this price, rounded once to the nearest
// micro-dollar. A price per million tokens is the price of one token in
// micro-dollars, so the sum needs no scaling; one call's rounding is at
// most half a micro-dollar, and sums of calls are exact from there.
func (p Price) Cost(u model.Usage) schematype.Micros {
	return schematype.Micros(math.Round(float64(u.InputUncached)*p.Input +
		float64(u.CacheRead)*p.CacheRead +
		float64(u.CacheWrite)*p.CacheWrite +
		float64(u.Output)*p.Output))
}

// Table holds prices by model name. It is not changed after it is built, so
// it is safe for concurrent use.
type Table struct {
	prices map[string]Price
}

// New builds a table from exactly these prices, without the defaults.
func New(prices map[string]Price) *Table {
	t := &Table{prices: make(map[string]Price, len(prices))}
	for name, p := range prices {
		t.prices[strings.ToLower(name)] = p
	}
	return t
}

// Default returns the table of default prices.
func Default() *Table {
	return New(defaults)
}

// Load returns the default prices overridden and extended by the price file
// at path.
func Load(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open price file: %w", err)
	}
	defer f.Close()
	t, err := Default().Merge(f)
	if err != nil {
		return nil, fmt.Errorf("price file %s: %w", path, err)
	}
	return t, nil
}

// filePrice is one model's entry in a price file. Pointers tell a price of
// 0 from a price left out.
type filePrice struct {
	Input      *float64 `json:"input"`
	CacheRead  *float64 `json:"cacheRead"`
	CacheWrite *float64 `json:"cacheWrite"`
	Output     *float64 `json:"output"`
}

// Merge returns a new table: t's prices, overridden and extended by the
// price file read from r.
func (t *Table) Merge(r io.Reader) (*Table, error) {
	var file struct {
		Models map[string]filePrice `json:"models"`
	}
	dec := json.NewDecoder(r)
	// A misspelt field would otherwise silently price tokens at 0.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: more than one JSON value")
	}
	out := &Table{prices: maps.Clone(t.prices)}
	for name, fp := range file.Models {
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("model name is empty")
		}
		p, err := fp.price()
		if err != nil {
			return nil, fmt.Errorf("model %q: %w", name, err)
		}
		out.prices[strings.ToLower(name)] = p
	}
	return out, nil
}

// price checks an entry and fills the cache prices it leaves out.
func (fp filePrice) price() (Price, error) {
	if fp.Input == nil || fp.Output == nil {
		return Price{}, errors.New(`"input" and "output" are required`)
	}
	p := Price{Input: *fp.Input, CacheRead: *fp.Input, CacheWrite: *fp.Input, Output: *fp.Output}
	if fp.CacheRead != nil {
		p.CacheRead = *fp.CacheRead
	}
	if fp.CacheWrite != nil {
		p.CacheWrite = *fp.CacheWrite
	}
	for _, v := range []float64{p.Input, p.CacheRead, p.CacheWrite, p.Output} {
		if v < 0 {
			return Price{}, errors.New("prices cannot be negative")
		}
	}
	return p, nil
}

// Lookup finds the price of a model: the entry with the longest name that
// is the model's name or a prefix of it ending where a word of the name
// ends, so "gpt-4o" prices "gpt-4o-2024-08-06" but "o3" does not price "o30".
func (t *Table) Lookup(modelName string) (Price, bool) {
	name := strings.ToLower(strings.TrimSpace(modelName))
	if p, ok := t.prices[name]; ok {
		return p, true
	}
	// Cutting at each word end from the right finds the longest match
	// first, in a handful of map lookups whatever the table's size.
	for i := len(name) - 1; i > 0; i-- {
		if isWordByte(name[i]) {
			continue
		}
		if p, ok := t.prices[name[:i]]; ok {
			return p, true
		}
	}
	return Price{}, false
}

// isWordByte reports whether c continues a word of a model name.
func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// Cost is what usage costs on a model; false, with 0, when the model has no
// price.
func (t *Table) Cost(modelName string, u model.Usage) (schematype.Micros, bool) {
	p, ok := t.Lookup(modelName)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}

// Models lists the model names the table prices, sorted, for display.
func (t *Table) Models() []string {
	return slices.Sorted(maps.Keys(t.prices))
}
