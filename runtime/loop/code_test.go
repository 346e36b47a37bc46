package loop_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// TestRunCodeFailureIsHeardAsError: code that ran and failed (a throw, a
// bound) is an ERROR the model hears with the bound named and what the
// code printed before, never a refusal; bad arguments stay refused, and
// a run that works is a hit.
func TestRunCodeFailureIsHeardAsError(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{
				call("ok", "run_code", `{"code": "console.log([1, 2, 3].reduce((s, n) => s + n, 0))"}`),
				call("deep", "run_code", `{"code": "console.log(\"reached step 2\"); function f() { return f() + 1 } f()"}`),
				call("throw", "run_code", `{"code": "console.log(\"parsed\"); throw new Error(\"no rows\")"}`),
				call("bad", "run_code", `{"code": "console.log(1)", "toolResults": ["made-up"]}`),
			}},
			{Text: "Done."},
		}}
		h := newHarness(t, d, p)
		id := h.send(t, h.conversation(t, "run_code"), "sum it", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		by := map[string]string{}
		outcome := map[string]schematype.Outcome{}
		for _, c := range h.calls(t, id) {
			by[c.CallID], outcome[c.CallID] = *c.Heard, c.Outcome
		}
		require.Equal(t, schematype.OutcomeHits, outcome["ok"], by["ok"])
		require.Contains(t, by["ok"], `6\n`)
		require.Equal(t, schematype.OutcomeError, outcome["deep"], by["deep"])
		require.Contains(t, by["deep"], "run_code hit its call depth bound")
		require.Contains(t, by["deep"], "Before that it printed:\nreached step 2\n")
		require.Equal(t, schematype.OutcomeError, outcome["throw"], by["throw"])
		require.Contains(t, by["throw"], "run_code failed: Error: no rows")
		require.Contains(t, by["throw"], "Before that it printed:\nparsed\n")
		require.Equal(t, schematype.OutcomeRefused, outcome["bad"], by["bad"])
		require.Contains(t, by["bad"], `ref "made-up" not found; no code ran`)
	})
}
