package loop_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model"
)

// TestBatchReadsSeeTheBatchsWrites runs 50 turns, each one batch that edits
// a file and searches, reads and lists the workspace in the same answer —
// half of them with the reads asked before the edit. Every read sees the
// edit, every time. (Run concurrently, the search saw the edit in 3 runs
// of 5.)
func TestBatchReadsSeeTheBatchsWrites(t *testing.T) {
	t.Parallel()
	const runs = 50
	each(t, func(t *testing.T, d *db.DB) {
		var answers []model.Response
		for i := range runs {
			from, to := "draft", "final"
			if i%2 == 1 {
				from, to = to, from
			}
			edit := call("e", "edit_file", fmt.Sprintf(`{"path": "memo.md", "edits": [{"old": "status: %s", "new": "status: %s"}]}`, from, to))
			reads := []model.ToolCall{
				call("s", "search_files", fmt.Sprintf(`{"strings": ["status: %s"]}`, to)),
				call("r", "read_file", `{"path": "memo.md"}`),
				call("n", "write_file", fmt.Sprintf(`{"files": [{"path": "run-%d.md", "content": "x"}]}`, i)),
				call("l", "list_files", `{}`),
			}
			batch := append([]model.ToolCall{edit}, reads...)
			if i%4 >= 2 {
				batch = append(reads, edit)
			}
			answers = append(answers, model.Response{ToolCalls: batch}, model.Response{Text: "Done."})
		}
		p := &scripted{answers: answers}
		h := newHarness(t, d, p)
		conv := h.conversation(t)
		h.gql(t, `mutation($c: ID) { writeFiles(conversationId: $c, files: [{path: "memo.md", content: "status: draft\n"}]) { files { path } } }`,
			map[string]any{"c": conv})
		for i := range runs {
			to := "final"
			if i%2 == 1 {
				to = "draft"
			}
			id := h.send(t, conv, fmt.Sprintf("run %d", i), "")
			require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
			by := map[string]string{}
			for _, c := range h.calls(t, id) {
				require.Equal(t, schematype.OutcomeHits, c.Outcome, "run %d %s: %s", i, c.Name, *c.Heard)
				by[c.CallID] = *c.Heard
			}
			require.Contains(t, by["s"], "status: "+to, "run %d: the search sees the edit", i)
			require.Contains(t, by["r"], "status: "+to, "run %d: the read sees the edit", i)
			require.Contains(t, by["l"], fmt.Sprintf("run-%d.md", i), "run %d: the listing sees the batch's new file", i)
		}
	})
}
