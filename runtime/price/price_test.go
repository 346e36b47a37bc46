package price

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/model"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		give   string
		want   Price
		wantOK bool
	}{
		{name: "exact", give: "gpt-4o", want: defaults["gpt-4o"], wantOK: true},
		{name: "dated snapshot", give: "gpt-4o-2024-08-06", want: defaults["gpt-4o"], wantOK: true},
		{name: "snapshot with its own price", give: "gpt-4o-2024-05-13", want: defaults["gpt-4o-2024-05-13"], wantOK: true},
		{name: "longest prefix wins", give: "gpt-4o-mini-2024-07-18", want: defaults["gpt-4o-mini"], wantOK: true},
		{name: "family", give: "claude-sonnet-4-5-20250929", want: defaults["claude-sonnet-4"], wantOK: true},
		{name: "newer family member", give: "claude-opus-4-5-20251101", want: defaults["claude-opus-4-5"], wantOK: true},
		{name: "older family member", give: "claude-opus-4-1-20250805", want: defaults["claude-opus-4"], wantOK: true},
		{name: "vertex style suffix", give: "claude-haiku-4-5@20251001", want: defaults["claude-haiku-4-5"], wantOK: true},
		{name: "case and spaces", give: " GPT-4.1-Mini ", want: defaults["gpt-4.1-mini"], wantOK: true},
		{name: "prefix must end a word", give: "o30-preview", wantOK: false},
		{name: "reasoning model", give: "o4-mini-2025-04-16", want: defaults["o4-mini"], wantOK: true},
		{name: "replay is priced as gpt-4.1, estimated", give: "replay", want: Price{Input: 2.00, CacheRead: 0.50, CacheWrite: 2.00, Output: 8.00}, wantOK: true},
		{name: "unknown", give: "llama3.1:8b", wantOK: false},
		{name: "empty", give: "", wantOK: false},
	}
	table := Default()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := table.Lookup(tt.give)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		model  string
		give   model.Usage
		want   schematype.Micros
		wantOK bool
	}{
		{
			name:  "openai with cache reads",
			model: "gpt-4o-2024-11-20",
			give:  model.Usage{InputUncached: 1000, CacheRead: 2000, Output: 500},
			// 1000×2.50 + 2000×1.25 + 500×10 = 10,000 per million
			want:   10_000,
			wantOK: true,
		},
		{
			name:   "anthropic, every kind",
			model:  "claude-sonnet-4-5",
			give:   model.Usage{InputUncached: 1_000_000, CacheRead: 1_000_000, CacheWrite: 1_000_000, Output: 1_000_000},
			want:   (3 + 0.30 + 3.75 + 15) * 1e6,
			wantOK: true,
		},
		{
			// 7 cached tokens at $0.075 a million: 0.525 micro-dollars, rounded once.
			name: "rounded to the micro-dollar", model: "gpt-4o-mini", give: model.Usage{CacheRead: 7},
			want: 1, wantOK: true,
		},
		{name: "no tokens", model: "gpt-4.1", give: model.Usage{}, want: 0, wantOK: true},
		{name: "unknown model", model: "mystery-1", give: model.Usage{InputUncached: 10, Output: 10}, want: 0, wantOK: false},
	}
	table := Default()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := table.Cost(tt.model, tt.give)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prices.json")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestLoad(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `{
	  "models": {
	    "gpt-4o": {"input": 2, "cacheRead": 1, "cacheWrite": 3, "output": 9},
	    "My-Local-Model": {"input": 0.5, "output": 1.5}
	  }
	}`)
	table, err := Load(path)
	require.NoError(t, err)

	tests := []struct {
		name string
		give string
		want Price
	}{
		{name: "override", give: "gpt-4o-2024-08-06", want: Price{Input: 2, CacheRead: 1, CacheWrite: 3, Output: 9}},
		{name: "addition, cache prices default to input", give: "my-local-model", want: Price{Input: 0.5, CacheRead: 0.5, CacheWrite: 0.5, Output: 1.5}},
		{name: "defaults kept", give: "gpt-4o-mini", want: defaults["gpt-4o-mini"]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := table.Lookup(tt.give)
			require.True(t, ok)
			require.Equal(t, tt.want, got)
		})
	}

	// Loading builds a new table; the defaults are untouched.
	got, ok := Default().Lookup("gpt-4o")
	require.True(t, ok)
	require.Equal(t, defaults["gpt-4o"], got)
	require.Contains(t, table.Models(), "my-local-model")
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give string
		want string
	}{
		{name: "misspelt field", give: `{"models": {"x": {"input": 1, "outptu": 2}}}`, want: `unknown field "outptu"`},
		{name: "missing output", give: `{"models": {"x": {"input": 1}}}`, want: `model "x": "input" and "output" are required`},
		{name: "negative", give: `{"models": {"x": {"input": 1, "output": -2}}}`, want: `model "x": prices cannot be negative`},
		{name: "empty name", give: `{"models": {" ": {"input": 1, "output": 2}}}`, want: "model name is empty"},
		{name: "not json", give: `models: x`, want: "decode: invalid character"},
		{name: "trailing value", give: `{"models": {}} {}`, want: "more than one JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(writeFile(t, tt.give))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "absent.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestMergeFromReader(t *testing.T) {
	t.Parallel()
	base := New(map[string]Price{"a": {Input: 1, Output: 1}})
	merged, err := base.Merge(strings.NewReader(`{"models": {"b": {"input": 2, "output": 4}}}`))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, merged.Models())
	require.Equal(t, []string{"a"}, base.Models())
}

func BenchmarkCost(b *testing.B) {
	table := Default()
	u := model.Usage{InputUncached: 1200, CacheRead: 5000, CacheWrite: 300, Output: 400}
	for b.Loop() {
		if _, ok := table.Cost("claude-sonnet-4-5-20250929", u); !ok {
			b.Fatal("no price")
		}
	}
}
