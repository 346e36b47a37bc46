package code_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/tooltest"
)

func TestDefinition(t *testing.T) {
	t.Parallel()
	d := code.RunCode
	require.Equal(t, []tools.Definition{d}, code.Definitions)
	require.Equal(t, tools.OfferAllowlisted, d.Offered)
	require.Equal(t, tools.EffectWrite, d.Effect, "a run writes the workspace: never sent twice")
	require.Equal(t, tools.PreviewLarge, d.Preview)
	require.Contains(t, d.Operation, "runCode(conversationId: $conversationId")
	// The description is written against misuse: when not to call it.
	require.Contains(t, d.Description, "Don't use it for data you can already read whole")
	require.Equal(t, code.MaxToolResults, d.Limits["toolResults"])
	require.LessOrEqual(t, len(d.Wire()), 900)

	s := tooltest.Schema(t, d.Schema)
	tests := []struct {
		give string
		want bool
	}{
		{give: `{"code": "console.log(1)"}`, want: true},
		{give: `{"code": "1", "toolResults": ["a", "b", "c"]}`, want: true},
		{give: `{"code": "1", "toolResults": ["a", "b", "c", "d"]}`, want: false},
		{give: `{"toolResults": ["a"]}`, want: false},
		{give: `{"code": "1", "language": "python"}`, want: false},
	}
	for _, tt := range tests {
		var v any
		require.NoError(t, json.Unmarshal([]byte(tt.give), &v))
		require.Equal(t, tt.want, s.Validate(v) == nil, tt.give)
	}
}
