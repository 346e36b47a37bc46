package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingEncoder encodes a deck as its names, counting its calls.
type countingEncoder struct {
	mu    sync.Mutex
	calls int
}

func (c *countingEncoder) encode(tools []ToolSpec) (string, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	var b strings.Builder
	for _, t := range tools {
		if !json.Valid(t.Schema) {
			return "", fmt.Errorf("tool %q: schema is not valid JSON", t.Name)
		}
		fmt.Fprintf(&b, "%s:%s:%s;", t.Name, t.Description, t.Schema)
	}
	return b.String(), nil
}

func deckOf(schema string) []ToolSpec {
	return []ToolSpec{
		{Name: "calculator", Description: "Arithmetic.", Schema: json.RawMessage(`{"type":"object"}`)},
		{Name: "search", Description: "Finds.", Schema: json.RawMessage(schema)},
	}
}

func TestDeckEncodesEachDeckOnce(t *testing.T) {
	t.Parallel()
	var d Deck[string]
	var enc countingEncoder
	// Each turn builds its own slice of the same definitions.
	for range 3 {
		got, err := d.Get(deckOf(`{"b":1,"a":2}`), enc.encode)
		require.NoError(t, err)
		require.Equal(t, `calculator:Arithmetic.:{"type":"object"};search:Finds.:{"b":1,"a":2};`, got)
	}
	require.Equal(t, 1, enc.calls)

	// Any byte changed is another deck: the schema, the description, the
	// order of the tools, a byte moved from one field to the next.
	changed := [][]ToolSpec{
		deckOf(`{"a":2,"b":1}`),
		{deckOf("{}")[0], {Name: "search", Description: "Finds!", Schema: json.RawMessage(`{"b":1,"a":2}`)}},
		{deckOf(`{"b":1,"a":2}`)[1], deckOf(`{"b":1,"a":2}`)[0]},
		{{Name: "ab", Description: "c", Schema: json.RawMessage("{}")}},
		{{Name: "a", Description: "bc", Schema: json.RawMessage("{}")}},
		nil,
	}
	for i, tools := range changed {
		want, err := enc.encode(tools)
		require.NoError(t, err)
		got, err := d.Get(tools, enc.encode)
		require.NoError(t, err)
		require.Equal(t, want, got, "deck %d", i)
	}
	require.Equal(t, 1+2*len(changed), enc.calls)
}

func TestDeckKeepsItsOwnCopy(t *testing.T) {
	t.Parallel()
	var d Deck[string]
	var enc countingEncoder
	tools := deckOf(`{"type":"object"}`)
	first, err := d.Get(tools, enc.encode)
	require.NoError(t, err)
	// A caller that rewrites its schema in place has another deck.
	copy(tools[1].Schema, `{"type":"number"}`)
	got, err := d.Get(tools, enc.encode)
	require.NoError(t, err)
	require.Contains(t, got, `{"type":"number"}`)
	require.Equal(t, 2, enc.calls)
	again, err := d.Get(deckOf(`{"type":"object"}`), enc.encode)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, 2, enc.calls)
}

func TestDeckErrorsAreNotRemembered(t *testing.T) {
	t.Parallel()
	var d Deck[string]
	var enc countingEncoder
	for range 2 {
		_, err := d.Get(deckOf(`{`), enc.encode)
		require.EqualError(t, err, `tool "search": schema is not valid JSON`)
	}
	require.Equal(t, 2, enc.calls)
}

func TestDeckIsBounded(t *testing.T) {
	t.Parallel()
	var d Deck[string]
	var enc countingEncoder
	for i := range 3 * deckCacheSize {
		_, err := d.Get(deckOf(fmt.Sprintf(`{"n":%d}`, i)), enc.encode)
		require.NoError(t, err)
	}
	require.Len(t, d.entries, deckCacheSize)
}

func TestDeckConcurrentTurns(t *testing.T) {
	t.Parallel()
	var d Deck[string]
	var enc countingEncoder
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				tools := deckOf(fmt.Sprintf(`{"n":%d}`, (g+i)%4))
				want, _ := enc.encode(tools)
				got, err := d.Get(tools, enc.encode)
				if err == nil && got != want {
					err = errors.New("deck " + got + " for " + want)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
