package loop_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// rows is an MCP server whose one tool answers a result with per-item
// failures whose input and message hold a NUL, as a tool reading a
// binary format might.
func rows(t *testing.T) string {
	server := sdk.NewServer(&sdk.Implementation{Name: "rows", Version: "1"}, nil)
	server.AddTool(&sdk.Tool{Name: "batch", Description: "Read records by name.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"names": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: map[string]any{
				"results":  []any{nil, "c\x00d"},
				"failures": []any{map[string]any{"item": 0, "input": "a\x00b", "kind": "ERROR", "message": "record a\x00b is unreadable"}},
			}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A NUL in every JSON column a turn writes (the agent's instructions kept
// with the turn, a clarification's question, options and answer, a tool
// call's per-item failures, the suggestions) is stored and read back
// byte for byte through GraphQL, on both databases: PostgreSQL's jsonb
// would refuse \u0000, so these columns are json there.
func TestNulInJSONColumns(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("q", "clarify", `{"question": "Which\u0000 year?", "options": ["20\u000025", "2026"], "recommended": "2026"}`)}},
			{ToolCalls: []model.ToolCall{
				call("b", "rows__batch", `{"names": ["a\u0000b", "c"]}`),
				call("s", "suggest_next_actions", `{"suggestions": ["Try\u0000 again"]}`),
			}},
			{Text: "Done\x00."},
		}}
		h := newHarness(t, d, p)
		h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "rows", url: $u, allowedTools: ["batch"]}) { id } }`,
			map[string]any{"u": rows(t)})
		conv := h.agent(t, map[string]any{"instructions": "Be\x00 exact.", "tools": []string{"rows__batch"}})
		id := h.send(t, conv, "Read\x00 them", "")
		waiting := h.wait(t, id)
		require.Equal(t, turn.StatusWAITING_FOR_CLARIFICATION, waiting.Status, waiting.Error)

		const clarification = `clarification { question options recommended answer }`
		q := `query($id: ID!) { node(id: $id) { ... on Turn { status userText answer suggestions ` + clarification +
			` toolCalls { name outcome failures { item input kind message } } } } }`
		got := h.gql(t, q, map[string]any{"id": id})
		require.Equal(t, "Which\x00 year?", dig(got, "node", "clarification", "question"))
		require.Equal(t, []any{"20\x0025", "2026"}, dig(got, "node", "clarification", "options"))

		h.gql(t, `mutation($t: ID!, $a: String!) { answerClarification(input: {turnId: $t, answer: $a}) { id } }`,
			map[string]any{"t": id, "a": "20\x0025"})
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)

		got = h.gql(t, q, map[string]any{"id": id})
		require.Equal(t, "Read\x00 them", dig(got, "node", "userText"))
		require.Equal(t, "Done\x00.", dig(got, "node", "answer"))
		require.Equal(t, "20\x0025", dig(got, "node", "clarification", "answer"))
		require.Equal(t, []any{"Try\x00 again"}, dig(got, "node", "suggestions"))
		batch := dig(got, "node", "toolCalls", 1).(map[string]any)
		require.Equal(t, "rows__batch", batch["name"])
		require.Equal(t, []any{map[string]any{"item": float64(0), "input": "a\x00b", "kind": "ERROR", "message": "record a\x00b is unreadable"}},
			batch["failures"])

		// What the turn kept of the agent, read as the system.
		tu := h.client.Turn.GetX(tenancy.System(context.Background()), mustDecode(t, id))
		require.Equal(t, "Be\x00 exact.", tu.AgentConfig.Instructions)
	})
}
