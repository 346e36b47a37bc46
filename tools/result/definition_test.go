package result_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/registry"
	"github.com/toolgate/toolgate/tools/result"
	"github.com/toolgate/toolgate/tools/tooltest"
)

func TestDefinition(t *testing.T) {
	t.Parallel()
	d := result.Definition
	require.Equal(t, "read_tool_result", d.Name)
	require.Equal(t, "result", d.Family)
	require.True(t, d.AlwaysOn())
	require.Equal(t, tools.EffectRead, d.Effect)
	// Windows are within the budget the model chose: never cut again.
	require.Equal(t, tools.PreviewExempt, d.Preview)
	require.Equal(t, "results", d.GuidanceKey)
	require.Contains(t, d.Guidance, "read_tool_result ref")
	require.LessOrEqual(t, len(d.Description), 600)
	require.Contains(t, d.Operation, d.Field+"(conversationId: $conversationId")
	require.Contains(t, d.Operation, "$conversationId: ID,")
	// Every argument the model may give is a variable of the operation.
	var schema struct {
		Properties           map[string]any `json:"properties"`
		AdditionalProperties *bool          `json:"additionalProperties"`
	}
	require.NoError(t, json.Unmarshal(d.Schema, &schema))
	require.NotNil(t, schema.AdditionalProperties)
	require.False(t, *schema.AdditionalProperties)
	require.Len(t, schema.Properties, 6)
	for name := range schema.Properties {
		require.Contains(t, d.Operation, "$"+name+":", name)
	}
	// The operation selects what Absent and the runtime read.
	for _, f := range []string{"absent error", "hits", "failures { item input kind message }", "evidence { ref start end }"} {
		require.Contains(t, d.Operation, f)
	}
	require.Equal(t, map[string]int{
		"refs": 3, "defaultMaxChars": 4000, "minMaxChars": 1024, "maxChars": 20000, "defaultContextChars": 200, "contextChars": 1000,
	}, d.Limits)
	t.Logf("%d characters on the wire", len([]rune(string(d.Wire()))))
}

func TestRegisteredWithTheAlwaysOnTools(t *testing.T) {
	t.Parallel()
	var names []string
	for _, d := range registry.All() {
		names = append(names, d.Name)
	}
	i := strings.Index(strings.Join(names, " "), "calculator read_tool_result read_transcript")
	require.GreaterOrEqual(t, i, 0, names)
	got, ok := registry.ByName("read_tool_result")
	require.True(t, ok)
	require.Equal(t, "toolResults", got.Field)
}

func TestSchemaTakesTheContractArguments(t *testing.T) {
	t.Parallel()
	s := tooltest.Schema(t, result.Definition.Schema)
	tests := []struct {
		give string
		ok   bool
	}{
		{give: `{"refs": ["r_1"]}`, ok: true},
		{give: `{"refs": ["r_1", "r_2", "r_3"], "offset": 4000, "maxChars": 20000}`, ok: true},
		{give: `{"refs": ["r_1"], "query": "reimbursment deadline", "match": "fuzzy", "contextChars": 200, "maxChars": 4000}`, ok: true},
		{give: `{"refs": ["r_1"], "query": "x", "match": "exact"}`, ok: true},
		{give: `{}`},
		{give: `{"refs": []}`},
		{give: `{"refs": ["1", "2", "3", "4"]}`},
		{give: `{"refs": ["r_1"], "maxChars": 1023}`},
		{give: `{"refs": ["r_1"], "maxChars": 20001}`},
		{give: `{"refs": ["r_1"], "query": "x", "match": "regex"}`},
		{give: `{"refs": ["r_1"], "query": "x", "contextChars": 1001}`},
		{give: `{"refs": ["r_1"], "ref": "r_2"}`},
	}
	for _, tt := range tests {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.give))
		require.NoError(t, err)
		err = s.Validate(v)
		if tt.ok {
			require.NoError(t, err, tt.give)
		} else {
			require.Error(t, err, tt.give)
		}
	}
}
