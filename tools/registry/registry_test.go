package registry_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/registry"
)

// TestDescriptionsSayWhenNotToCall holds every description to the rule it
// is written by: a description is the only instruction the model reads
// before it calls, so each names the failure it prevents with a "Don't"
// clause, and several spend more words on when not to call than on what
// the call does. (Two of fifteen had any such clause.)
func TestDescriptionsSayWhenNotToCall(t *testing.T) {
	t.Parallel()
	longerWhenNot := 0
	for _, d := range registry.All() {
		what, whenNot, ok := strings.Cut(d.Description, "Don't ")
		require.True(t, ok, "%s: no when-not clause (\"Don't …\"): %s", d.Name, d.Description)
		require.NotEmpty(t, strings.TrimSpace(what), "%s: say what the call does first", d.Name)
		require.GreaterOrEqual(t, len(strings.Fields(whenNot)), 6, "%s: a when-not clause names the failure it prevents", d.Name)
		if len(strings.Fields(whenNot)) > len(strings.Fields(what)) {
			longerWhenNot++
		}
	}
	require.GreaterOrEqual(t, longerWhenNot, 3, "several descriptions spend more words on when not to call")
}

// TestReadToolResultReadsPastedRefs: a person who pastes a ref into the
// chat wants to see what it holds; the description says to read it.
func TestReadToolResultReadsPastedRefs(t *testing.T) {
	t.Parallel()
	d, ok := registry.ByName("read_tool_result")
	require.True(t, ok)
	require.Contains(t, d.Description, "when a person pastes a ref into the chat: read it and show them what it holds")
}

// TestBriefs: every tool a deferring turn sends as a stub has a brief that
// says what it does in at most tools.MaxBrief characters, and the stub is
// that brief and an open schema; the tools such a turn keeps whole need
// none.
func TestBriefs(t *testing.T) {
	t.Parallel()
	for _, d := range registry.All() {
		if offer.Keeps(d) {
			continue
		}
		require.NotEmpty(t, d.Brief, d.Name)
		require.LessOrEqual(t, utf8.RuneCountInString(d.Brief), tools.MaxBrief, d.Name)
		require.True(t, strings.HasSuffix(d.Brief, "."), "%s: a brief is a sentence", d.Name)
		stub := d.Stub()
		require.Equal(t, d.Brief, stub.Description)
		require.JSONEq(t, tools.StubSchema, string(stub.Schema))
		require.Less(t, len(stub.Wire()), len(d.Wire())/2, "%s: a stub costs a fraction of the definition", d.Name)
	}
}
