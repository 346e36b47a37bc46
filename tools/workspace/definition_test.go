package workspace_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/tooltest"
	"github.com/toolgate/toolgate/tools/workspace"
)

// wireBudget bounds what the six definitions cost every model call
// together; every turn pays it. It leaves room for the when-not clauses
// the descriptions need, well inside the always-paid ceiling.
const wireBudget = 4000

func TestDefinitions(t *testing.T) {
	t.Parallel()
	names := []string{}
	wire := 0
	for _, d := range workspace.Definitions {
		names = append(names, d.Name)
		require.Equal(t, "workspace", d.Family)
		require.Equal(t, tools.OfferWorkspace, d.Offered, d.Name)
		require.LessOrEqual(t, len(d.Description), 600, d.Name)
		require.Contains(t, d.Operation, d.Field+"(conversationId: $conversationId", d.Name)
		require.Contains(t, d.Operation, "$conversationId: ID,", d.Name)
		var schema map[string]any
		require.NoError(t, json.Unmarshal(d.Schema, &schema), d.Name)
		require.Equal(t, false, schema["additionalProperties"], d.Name)
		tooltest.Schema(t, d.Schema)
		wire += len(d.Wire())
	}
	require.Equal(t, []string{"list_files", "search_files", "read_file", "write_file", "edit_file", "delete_file"}, names)
	require.LessOrEqual(t, wire, wireBudget)
	t.Logf("the six definitions: %d characters on the wire", wire)
}

func TestSchemasTakeTheContractArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		def  tools.Definition
		give string
		ok   bool
	}{
		{def: workspace.ListFiles, give: `{}`, ok: true},
		{def: workspace.ListFiles, give: `{"path": "docs"}`, ok: true},
		{def: workspace.ReadFile, give: `{"path": "a", "offset": 10, "maxChars": 2000}`, ok: true},
		{def: workspace.ReadFile, give: `{"path": "a", "maxChars": 100}`},
		{def: workspace.SearchFiles, give: `{"strings": ["a", "b"], "contextLines": 3}`, ok: true},
		{def: workspace.SearchFiles, give: `{"strings": ["1", "2", "3", "4", "5", "6"]}`},
		{def: workspace.SearchFiles, give: `{"strings": ["a"], "contextLines": 4}`},
		{def: workspace.WriteFile, give: `{"files": [{"path": "a", "content": "x"}]}`, ok: true},
		{def: workspace.WriteFile, give: `{"files": [{"path": "a", "_toolResultContext": {"sources": [{"ref": "r1", "field": ["rows", 3], "between": ["<b>", "</b>"]}]}}]}`, ok: true},
		{def: workspace.WriteFile, give: `{"files": [{"path": "a", "_toolResultContext": {"sources": [{"ref": "r1", "between": ["only one"]}]}}]}`},
		{def: workspace.WriteFile, give: `{"files": [{"path": "1"}, {"path": "2"}, {"path": "3"}, {"path": "4"}]}`},
		{def: workspace.WriteFile, give: `{"files": [{"path": "a", "mode": "append"}]}`},
		{def: workspace.EditFile, give: `{"path": "a", "edits": [{"old": "x", "new": "y"}]}`, ok: true},
		{def: workspace.EditFile, give: `{"path": "a", "edits": [{"old": "x"}]}`},
		{def: workspace.DeleteFile, give: `{"path": "a"}`, ok: true},
		{def: workspace.DeleteFile, give: `{}`},
	}
	for _, tt := range tests {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.give))
		require.NoError(t, err)
		err = tooltest.Schema(t, tt.def.Schema).Validate(v)
		if tt.ok {
			require.NoError(t, err, tt.def.Name+" "+tt.give)
		} else {
			require.Error(t, err, tt.def.Name+" "+tt.give)
		}
	}
}
