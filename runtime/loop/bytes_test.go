package loop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
)

// nulRecord is what crm__dump answers: a record with NUL separators, as a
// tool reading a binary format might.
const nulRecord = "id\x00name\x00email\n1\x00Ada\x00ada@example.com"

// A tool result with NUL characters is stored whole and read back, the
// turn completes, and the user's own NUL does the same, on both databases.
func TestNulInToolResultsAndMessages(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("a", "crm__dump", "{\"name\": \"Ada\\u0000Lovelace\"}")}},
			{Text: "Ada\x00 is contact 1."},
		}}
		h := newHarness(t, d, p)
		h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "crm", url: $u, allowedTools: ["dump"]}) { id } }`,
			map[string]any{"u": crm(t)})
		conv := h.conversation(t, "crm__dump")
		id := h.send(t, conv, "Dump\x00 Ada's record \xff\xfe please", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
		require.Nil(t, got.Error)

		calls := h.calls(t, id)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome)
		read := h.gql(t, `query($c: ID!, $r: [String!]!) { toolResults(conversationId: $c, refs: $r) { reads { text } } }`,
			map[string]any{"c": conv, "r": []string{*calls[0].Ref}})
		require.Equal(t, nulRecord, dig(read, "toolResults", "reads", 0, "text"), "the result read back whole")

		transcript := h.gql(t, `query($id: ID!) { node(id: $id) { ... on Turn { userText answer toolCalls { arguments } } } }`,
			map[string]any{"id": id})
		t.Log(transcript)
		require.Equal(t, "Dump\x00 Ada's record \uFFFD\uFFFD please", dig(transcript, "node", "userText"))
		require.Equal(t, "Ada\x00 is contact 1.", dig(transcript, "node", "answer"))

		// The stored turn, read as the system.
		tu := h.client.Turn.GetX(tenancy.System(context.Background()), mustDecode(t, id))
		require.Equal(t, "Ada\x00 is contact 1.", *tu.Answer)
	})
}

func mustDecode(t *testing.T, id string) int {
	t.Helper()
	n, err := gid.Decode(id)
	require.NoError(t, err)
	return n
}

// dig walks a decoded JSON value by keys and indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}
