package registry_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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
