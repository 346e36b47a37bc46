package graph_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools/calc"
	"github.com/toolgate/toolgate/tools/interact"
	"github.com/toolgate/toolgate/tools/tasks"
)

func TestCalculate(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	agentID := b.createAgent(t, b.alice.Token, "Helper")
	conv := b.startConversation(t, b.alice.Token, agentID, "sums")
	op := calc.Definition.Operation

	// By hand with an API token, then as the runtime posts it.
	data := b.do(t, b.alice.Token, op, map[string]any{"conversationId": conv, "expression": "2/3"}).ok(t)
	require.Equal(t, map[string]any{"value": "0.666666666667"}, get(data, calc.Definition.Field))
	tok := b.scopeToken(t, conv, calc.Definition.Name)
	data = b.do(t, tok, op, map[string]any{"conversationId": conv, "expression": "2^10 - 24"}).ok(t)
	require.Equal(t, "1000", get(data, "calculate", "value"))
	data = b.do(t, tok, op, map[string]any{"expression": "sqrt(2)"}).ok(t)
	require.Equal(t, "1.41421356237", get(data, "calculate", "value"), "a scope token names its conversation itself")

	tests := []struct {
		name  string
		token string
		vars  map[string]any
		code  string
		msg   string
	}{
		{name: "error position", token: b.alice.Token, vars: map[string]any{"conversationId": conv, "expression": "1 + (2 * 3"},
			code: "BAD_USER_INPUT", msg: "at character"},
		{name: "division by zero", token: b.alice.Token, vars: map[string]any{"conversationId": conv, "expression": "1/0"},
			code: "BAD_USER_INPUT", msg: "division by zero"},
		{name: "API token without conversation", token: b.alice.Token, vars: map[string]any{"expression": "1"},
			code: "BAD_USER_INPUT", msg: "conversationId is required with an API token"},
		{name: "tool not offered", token: b.scopeToken(t, conv, "read_transcript"), vars: map[string]any{"expression": "1"},
			code: "NOT_FOUND", msg: "not found"},
		{name: "foreign conversation", token: b.eve.Token, vars: map[string]any{"conversationId": conv, "expression": "1"},
			code: "NOT_FOUND", msg: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do(t, tt.token, op, tt.vars)
			require.Equal(t, tt.code, r.code(t))
			require.Contains(t, r.Errors[0].Message, tt.msg)
		})
	}
	_, err := calc.Evaluate("1 + (2 * 3")
	r := b.do(t, b.alice.Token, op, map[string]any{"conversationId": conv, "expression": "1 + (2 * 3"})
	require.Equal(t, err.Error(), r.Errors[0].Message, "the position message as calc words it")

	foreign := b.do(t, b.eve.Token, op, map[string]any{"conversationId": conv, "expression": "1"})
	madeUp := b.do(t, b.eve.Token, op, map[string]any{"conversationId": graph.EncodeID(1<<40 + 5), "expression": "1"})
	require.Equal(t, string(madeUp.Raw), string(foreign.Raw))
}

const suggestionsDoc = `query($id: ID!) { conversation(id: $id) { turns(first: 10) { edges { node { number suggestions } } } } }`

// suggestionsByTurn returns each turn's suggestions, by turn number.
func suggestionsByTurn(t *testing.T, b *testBundle, conv string) map[int][]any {
	t.Helper()
	data := b.do(t, b.alice.Token, suggestionsDoc, map[string]any{"id": conv}).ok(t)
	out := map[int][]any{}
	for _, e := range get(data, "conversation", "turns", "edges").([]any) {
		out[int(get(e, "node", "number").(float64))] = get(e, "node", "suggestions").([]any)
	}
	return out
}

func TestSuggestNextActions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "ideas")
		op := interact.Suggest.Operation

		r := b.do(t, b.alice.Token, op, map[string]any{"conversationId": conv, "suggestions": []string{"a"}})
		require.Equal(t, "BAD_USER_INPUT", r.code(t))
		require.Equal(t, "the conversation has no turn yet", r.Errors[0].Message)

		seedTurns(t, b.client, conv, pastTurn{user: "one"}, pastTurn{user: "two"})
		// An API token (the playground) stores on the latest turn.
		data := b.do(t, b.alice.Token, op, map[string]any{"conversationId": conv,
			"suggestions": []string{" Show the chart ", "Explain", "Explain"}}).ok(t)
		require.Equal(t, map[string]any{"saved": 2.0}, get(data, interact.Suggest.Field))
		// The ack's meaningful fields: what was stored, and on which turn;
		// the deprecated ok still answers for today's clients.
		data = b.do(t, b.alice.Token, `mutation($c: ID, $s: [String!]!) { suggestNextActions(conversationId: $c, suggestions: $s) { ok saved suggestions turn { number } } }`,
			map[string]any{"c": conv, "s": []string{" Show the chart ", "Explain", "Explain"}}).ok(t)
		require.Equal(t, map[string]any{"ok": true, "saved": 2.0, "suggestions": []any{"Show the chart", "Explain"}, "turn": map[string]any{"number": 2.0}},
			get(data, "suggestNextActions"))
		require.Equal(t, map[int][]any{1: {}, 2: {"Show the chart", "Explain"}}, suggestionsByTurn(t, b, conv))

		// A scope token stores on its own turn, replacing nothing else.
		tok := b.scopeToken(t, conv, interact.Suggest.Name)
		b.do(t, tok, op, map[string]any{"conversationId": conv, "suggestions": []string{"Next"}}).ok(t)
		b.do(t, tok, op, map[string]any{"suggestions": []string{"Again", "Later"}}).ok(t)
		require.Equal(t, map[int][]any{1: {}, 2: {"Show the chart", "Explain"}, 3: {"Again", "Later"}}, suggestionsByTurn(t, b, conv))

		tests := []struct {
			give []string
			want string
		}{
			{give: []string{}, want: "suggestions: give 1 to 5"},
			{give: []string{"a", "b", "c", "d", "e", "f"}, want: "suggestions: at most 5, got 6"},
			{give: []string{"a", "  "}, want: "suggestions[1]: empty"},
			{give: []string{strings.Repeat("é", 201)}, want: "suggestions[0]: at most 200 characters"},
		}
		for _, tt := range tests {
			r := b.do(t, tok, op, map[string]any{"suggestions": tt.give})
			require.Equal(t, "BAD_USER_INPUT", r.code(t), tt.want)
			require.Equal(t, tt.want, r.Errors[0].Message)
		}

		require.Equal(t, "NOT_FOUND", b.do(t, b.scopeToken(t, conv, "calculator"), op, map[string]any{"suggestions": []string{"x"}}).code(t))
		foreign := b.do(t, b.eve.Token, op, map[string]any{"conversationId": conv, "suggestions": []string{"x"}})
		madeUp := b.do(t, b.eve.Token, op, map[string]any{"conversationId": graph.EncodeID(1<<40 + 5), "suggestions": []string{"x"}})
		require.Equal(t, "NOT_FOUND", foreign.code(t))
		require.Equal(t, string(madeUp.Raw), string(foreign.Raw))
		require.Equal(t, []any{"Again", "Later"}, suggestionsByTurn(t, b, conv)[3], "a refused call changes nothing")
		b.do(t, tok, op, map[string]any{"suggestions": []string{strings.Repeat("é", 200)}}).ok(t)
		require.Equal(t, []any{strings.Repeat("é", 200)}, suggestionsByTurn(t, b, conv)[3], "200 characters fit")
	})
}

const tasksDoc = `query($id: ID!) { conversation(id: $id) { tasks { title status } } }`

func TestTasks(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "plan")
		other := b.startConversation(t, b.alice.Token, agentID, "other")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		otherID, err := gid.Decode(other)
		require.NoError(t, err)
		list := func(id string) any {
			return get(b.do(t, b.alice.Token, tasksDoc, map[string]any{"id": id}).ok(t), "conversation", "tasks")
		}
		require.Equal(t, []any{}, list(conv))

		// The runtime applies the list with its own, unscoped client.
		ack, err := tasks.Apply(ctx, b.client, convID, json.RawMessage(`{"tasks": [
			{"title": "Gather figures", "status": "done"},
			{"title": "Draft report", "status": "in_progress"},
			{"title": "Send it", "status": "pending"}]}`))
		require.NoError(t, err)
		require.JSONEq(t, `{"ok": true, "saved": 3}`, string(ack))
		_, err = tasks.Apply(ctx, b.client, otherID, json.RawMessage(`{"tasks": [{"title": "Elsewhere", "status": "pending"}]}`))
		require.NoError(t, err)
		require.Equal(t, []any{
			map[string]any{"title": "Gather figures", "status": "DONE"},
			map[string]any{"title": "Draft report", "status": "IN_PROGRESS"},
			map[string]any{"title": "Send it", "status": "PENDING"},
		}, list(conv))

		// A new list replaces the old one whole.
		_, err = tasks.Apply(ctx, b.client, convID, json.RawMessage(`{"tasks": [{"title": "Send it", "status": "in_progress"}]}`))
		require.NoError(t, err)
		require.Equal(t, []any{map[string]any{"title": "Send it", "status": "IN_PROGRESS"}}, list(conv))
		require.Equal(t, []any{map[string]any{"title": "Elsewhere", "status": "PENDING"}}, list(other))

		tooMany := make([]tasks.Item, tasks.MaxTasks+1)
		for i := range tooMany {
			tooMany[i] = tasks.Item{Title: "t", Status: "pending"}
		}
		args, err := json.Marshal(map[string]any{"tasks": tooMany})
		require.NoError(t, err)
		_, err = tasks.Apply(ctx, b.client, convID, args)
		require.ErrorIs(t, err, tasks.ErrInvalid)
		require.EqualError(t, err, "invalid task list: at most 20 tasks, got 21")
		_, err = tasks.Apply(ctx, b.client, convID, json.RawMessage(`{"tasks": [
			{"title": "a", "status": "in_progress"}, {"title": "b", "status": "in_progress"}]}`))
		require.EqualError(t, err, "invalid task list: at most 1 task in_progress, got 2")
		require.Equal(t, []any{map[string]any{"title": "Send it", "status": "IN_PROGRESS"}}, list(conv), "a refused list changes nothing")

		// Another organisation sees neither the conversation nor its tasks.
		foreign := b.do(t, b.eve.Token, tasksDoc, map[string]any{"id": conv})
		require.Equal(t, "NOT_FOUND", foreign.code(t))
		require.Equal(t, string(b.do(t, b.eve.Token, tasksDoc, map[string]any{"id": graph.EncodeID(1<<40 + 9)}).Raw), string(foreign.Raw))
		require.NotContains(t, string(foreign.Raw), "Send it")

		// An empty list clears it.
		_, err = tasks.Apply(ctx, b.client, convID, json.RawMessage(`{"tasks": []}`))
		require.NoError(t, err)
		require.Equal(t, []any{}, list(conv))
		require.Zero(t, b.client.Turn.Query().Where(turn.ConversationID(convID)).CountX(ctx), "tasks touch no turn")
	})
}
