package loop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/registry"
)

// TestDeferredDefinitions runs a turn of an agent that defers its tools:
// the prefix carries the always-on tools and get_tool_schema whole and the
// others as stubs; a call to a stub before its definition was read is
// refused and pointed at get_tool_schema, even with arguments that fit;
// get_tool_schema gives the whole definition (and none of a tool the turn
// is not offered); the same call then runs. The
// next turn, with the agent back on FULL, sends every definition whole and
// pays more prefix for it.
func TestDeferredDefinitions(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		tasks := `{"tasks": [{"title": "Draft the memo", "status": "in_progress"}]}`
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("c1", "update_tasks", tasks), call("c2", "memory_write", `{}`)}},
			{ToolCalls: []model.ToolCall{call("c3", "get_tool_schema", `{"names": ["update_tasks", "memory_write"]}`)}},
			{ToolCalls: []model.ToolCall{call("c4", "update_tasks", tasks)}},
			{Text: "The task list is up."},
			{Text: "Still up."},
		}}
		h := newHarness(t, d, p)
		conv := h.conversation(t, "update_tasks")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		ctx := tenancy.System(context.Background())
		agentID := h.client.Conversation.GetX(ctx, convID).AgentID
		h.client.Agent.UpdateOneID(agentID).SetToolLoading(agent.ToolLoadingDEFERRED).ExecX(ctx)

		id := h.send(t, conv, "Track the memo", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
		calls := h.calls(t, id)
		require.Len(t, calls, 4)

		// A call before the definition was read is refused, and the refusal
		// says where the definition is; a tool the turn is not offered is
		// refused as ever.
		require.Equal(t, schematype.OutcomeRefused, calls[0].Outcome)
		require.Equal(t, `tool "update_tasks" is listed in brief: read its definition with get_tool_schema first`, *calls[0].Message)
		require.Zero(t, calls[0].Attempts)
		require.Equal(t, schematype.OutcomeRefused, calls[1].Outcome)
		require.Equal(t, `tool "memory_write" is not available`, *calls[1].Message)

		// get_tool_schema gives update_tasks whole, and memory_write not at all.
		require.Equal(t, schematype.OutcomeHits, calls[2].Outcome, calls[2].Message)
		heard := lastTool(p.request(2))
		var schemas struct {
			Tools []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"tools"`
			Missing []string `json:"missing"`
		}
		require.NoError(t, json.Unmarshal([]byte(heard.Text), &schemas), heard.Text)
		whole, ok := registry.ByName("update_tasks")
		require.True(t, ok)
		require.Len(t, schemas.Tools, 1)
		require.Equal(t, whole.Description, schemas.Tools[0].Description)
		require.JSONEq(t, string(whole.Schema), string(schemas.Tools[0].Parameters))
		require.Equal(t, []string{"memory_write"}, schemas.Missing)
		require.Equal(t, schematype.OutcomeHits, calls[3].Outcome, calls[3].Message)

		// What was sent: every call the same prefix, the deferred tools as
		// stubs, the kept ones whole, and the notice in the system prompt.
		first := p.request(0)
		for i := 1; i < 4; i++ {
			require.Equal(t, first.System, p.request(i).System)
			require.Equal(t, first.Tools, p.request(i).Tools)
		}
		require.Contains(t, first.System, prompt.DeferNotice)
		sent := map[string]model.ToolSpec{}
		for _, s := range first.Tools {
			sent[s.Name] = s
		}
		for _, name := range []string{"update_tasks", "list_files", "write_file"} {
			def, _ := registry.ByName(name)
			require.Equal(t, def.Brief, sent[name].Description, name)
			require.JSONEq(t, tools.StubSchema, string(sent[name].Schema), name)
		}
		for _, name := range []string{"get_tool_schema", "read_tool_result", "calculator"} {
			def, _ := registry.ByName(name)
			require.Equal(t, def.Description, sent[name].Description, name)
			require.JSONEq(t, string(def.Schema), string(sent[name].Schema), name)
		}
		require.NotContains(t, sent, "memory_write")

		// The agent back on FULL: its next turn sends every tool whole
		// (get_tool_schema no longer offered) and records a larger prefix.
		h.client.Agent.UpdateOneID(agentID).SetToolLoading(agent.ToolLoadingFULL).ExecX(ctx)
		next := h.send(t, conv, "Still there?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, next).Status)
		full := p.request(4)
		require.NotContains(t, full.System, prompt.DeferNotice)
		for _, s := range full.Tools {
			require.NotEqual(t, "get_tool_schema", s.Name)
			require.False(t, strings.EqualFold(tools.StubSchema, string(s.Schema)), s.Name)
		}
		deferred := got.QueryModelCalls().FirstX(ctx).PrefixTokens
		whole2 := h.client.Turn.GetX(ctx, mustDecode(t, next)).QueryModelCalls().FirstX(ctx).PrefixTokens
		require.Less(t, deferred, whole2)
	})
}

// TestDeferredDefinitionsSurviveAPause: what a turn has read with
// get_tool_schema is rebuilt from its recorded calls when it resumes (here
// after a clarification), so a definition read before the pause still
// opens its tool after it; one never read is still refused.
func TestDeferredDefinitionsSurviveAPause(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		tasks := `{"tasks": [{"title": "Draft the memo", "status": "pending"}]}`
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("c1", "get_tool_schema", `{"names": ["update_tasks"]}`)}},
			{ToolCalls: []model.ToolCall{call("q1", "clarify", `{"question": "Which memo?"}`)}},
			{ToolCalls: []model.ToolCall{call("c2", "update_tasks", tasks), call("c3", "list_files", `{}`)}},
			{Text: "Listed."},
		}}
		h := newHarness(t, d, p)
		conv := h.conversation(t, "update_tasks")
		ctx := tenancy.System(context.Background())
		agentID := h.client.Conversation.GetX(ctx, mustDecode(t, conv)).AgentID
		h.client.Agent.UpdateOneID(agentID).SetToolLoading(agent.ToolLoadingDEFERRED).ExecX(ctx)

		id := h.send(t, conv, "Track the memo", "")
		require.Equal(t, turn.StatusWAITING_FOR_CLARIFICATION, h.wait(t, id).Status)
		h.gql(t, `mutation($t: ID!) { answerClarification(input: {turnId: $t, answer: "The Q3 one"}) { id } }`, map[string]any{"t": id})
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		calls := h.calls(t, id)
		require.Len(t, calls, 4)
		require.Equal(t, "update_tasks", calls[2].Name)
		require.Equal(t, schematype.OutcomeHits, calls[2].Outcome, calls[2].Message)
		require.Equal(t, "list_files", calls[3].Name)
		require.Equal(t, schematype.OutcomeRefused, calls[3].Outcome)
		require.Contains(t, *calls[3].Message, "listed in brief")
	})
}
