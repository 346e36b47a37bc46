package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/registry"
)

// TestEveryOutcomeIsStoredAndOnlyReadsAreEvidence: hits, an error and a
// refusal each get a ref that reopens what the model was told; the task
// list's acknowledgement is no evidence; Turn.grounding lists what the
// model saw of the hit, and nothing else.
func TestEveryOutcomeIsStoredAndOnlyReadsAreEvidence(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{
				call("f", "fetch_note", `{}`),
				call("b", "broken", `{}`),
				call("n", "not_offered", `{}`),
				call("u", "update_tasks", `{"tasks":[{"title":"check","status":"in_progress"}]}`),
			}},
			{Text: "Done."},
		}}
		empty := json.RawMessage(`{"type":"object","additionalProperties":false}`)
		fetch := tools.Definition{Name: "fetch_note", Family: "test", Offered: tools.OfferAlways, Effect: tools.EffectRead,
			Preview: tools.PreviewLarge, Schema: empty}
		broken := tools.Definition{Name: "broken", Family: "test", Offered: tools.OfferAlways, Effect: tools.EffectRead,
			Preview: tools.PreviewLarge, Schema: empty}
		h := newHarness(t, d, p, func(c *loop.Config) { c.Tools = append(registry.All(), fetch, broken) })
		h.disp.Builtins["fetch_note"] = func(context.Context, dispatch.Scope, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`"the deadline is Friday"`), nil
		}
		h.disp.Builtins["broken"] = func(context.Context, dispatch.Scope, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("disk on fire")
		}
		conv := h.conversation(t, "update_tasks")
		id := h.send(t, conv, "Check the note", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

		calls := h.calls(t, id)
		require.Len(t, calls, 4)
		want := []schematype.Outcome{schematype.OutcomeHits, schematype.OutcomeError, schematype.OutcomeRefused, schematype.OutcomeHits}
		for i, c := range calls {
			require.Equal(t, want[i], c.Outcome, *c.Heard)
			require.NotNil(t, c.Ref, "every outcome has a ref: %s", c.Name)
			stored := h.client.StoredResult.GetX(tenancy.System(context.Background()), *c.ResultID)
			if c.Outcome != schematype.OutcomeHits {
				require.Equal(t, *c.Heard, string(stored.Content), "the ref reopens what the model was told")
			}
		}
		require.Contains(t, *calls[1].Heard, "disk on fire")
		require.NotEmpty(t, calls[0].Evidence, "what the model saw of a read is evidence")
		require.Empty(t, calls[3].Evidence, "an acknowledgement is no evidence")
		require.Empty(t, calls[1].Evidence)
		require.Empty(t, calls[2].Evidence)

		data := h.gql(t, `query($id: ID!) { node(id: $id) { ... on Turn { grounding { sources { ref start end } coveredChars } } } }`,
			map[string]any{"id": id})
		g := data["node"].(map[string]any)["grounding"].(map[string]any)
		require.Equal(t, []any{map[string]any{"ref": *calls[0].Ref, "start": 0.0, "end": float64(len("the deadline is Friday"))}}, g["sources"])
		require.Equal(t, float64(len("the deadline is Friday")), g["coveredChars"])
	})
}
