package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/preview"
	"github.com/toolgate/toolgate/tools/web"
)

// TestWebToolsOfferedOnlyWhenApproved: a turn is offered the web tools its
// agent lists only when the server has a provider and the organisation
// enabled it.
func TestWebToolsOfferedOnlyWhenApproved(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		provider, enabled bool
		want              bool
	}{
		{name: "approved", provider: true, enabled: true, want: true},
		{name: "no provider", provider: false, enabled: true},
		{name: "not enabled", provider: true, enabled: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &scripted{answers: []model.Response{{Text: "Done."}}}
			h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p, func(c *loop.Config) { c.WebProvider = tt.provider })
			h.client.Organization.Update().SetWebResearch(tt.enabled).ExecX(tenancy.System(context.Background()))
			id := h.send(t, h.conversation(t, "research_web", "read_page"), "look it up", "")
			require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
			var names []string
			for _, s := range p.request(0).Tools {
				names = append(names, s.Name)
			}
			require.Equal(t, tt.want, slices.Contains(names, "research_web"), names)
			require.Equal(t, tt.want, slices.Contains(names, "read_page"), names)
		})
	}
}

// TestWebRetriedBeforeTheModelHears: a search provider and a page that
// answer 503 twice and then 200 are each asked three times before the
// model hears anything, and the model hears the hits with the attempts
// they took, never an outage.
func TestWebRetriedBeforeTheModelHears(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{}
		h := newHarness(t, d, p)
		h.client.Organization.Update().SetWebResearch(true).ExecX(tenancy.System(context.Background()))
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{call("s", "research_web", `{"queries":["tides"],"maxPages":0}`)}},
			{ToolCalls: []model.ToolCall{call("r", "read_page", fmt.Sprintf(`{"url":%q}`, h.page))}},
			{Text: "Done."},
		}
		h.search.down.Store(2)
		h.site.down.Store(2)
		id := h.send(t, h.conversation(t, "research_web", "read_page"), "how do tides work?", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

		calls := h.calls(t, id)
		require.Len(t, calls, 2)
		require.EqualValues(t, 3, h.search.requests.Load(), "503, 503, then 200")
		require.EqualValues(t, 3, h.site.requests.Load(), "503, 503, then 200")
		for i, want := range []string{"rise and fall", "rise and fall of sea levels"} {
			c := calls[i]
			require.Equal(t, schematype.OutcomeHits, c.Outcome, *c.Heard)
			require.Equal(t, 3, c.Attempts, c.Name)
			heard := lastTool(p.request(i + 1)).Text
			require.Equal(t, *c.Heard, heard)
			require.Contains(t, heard, want)
			require.True(t, strings.HasSuffix(heard, "\n[answered after 3 attempts]"), heard)
			require.NotContains(t, heard, "utage")
			require.NotContains(t, heard, "503")
		}
	})
}

// TestWebOutcomesAreToldApart: a search that never ran and a page whose
// site is down are outages, on the call as on its items, after the
// retries, with the attempts told; a page that is not there is an
// absence. The next turn replays each outcome as it was.
func TestWebOutcomesAreToldApart(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{}
		h := newHarness(t, d, p)
		h.client.Organization.Update().SetWebResearch(true).ExecX(tenancy.System(context.Background()))
		gone := strings.TrimSuffix(h.page, "/tides") + "/gone"
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{call("s", "research_web", `{"queries":["tides"]}`)}},
			{ToolCalls: []model.ToolCall{call("r", "read_page", fmt.Sprintf(`{"url":%q}`, h.page))}},
			{ToolCalls: []model.ToolCall{call("g", "read_page", fmt.Sprintf(`{"url":%q}`, gone))}},
			{Text: "The web could not be read."},
		}
		// Down for every attempt of the search and of the first page read.
		h.search.down.Store(4)
		h.site.down.Store(4)
		conv := h.conversation(t, "research_web", "read_page")
		id := h.send(t, conv, "how do tides work?", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

		calls := h.calls(t, id)
		require.Len(t, calls, 3)
		require.EqualValues(t, 4, h.search.requests.Load())
		require.EqualValues(t, 4+1, h.site.requests.Load(), "four attempts at the page, one at the page that is gone")
		tests := []struct {
			outcome  schematype.Outcome
			attempts int
			heard    []string
		}{
			{schematype.OutcomeOutage, 4, []string{"outage: it never ran (search did not run: search provider answered HTTP 503)", "\n[gave up after 4 attempts]"}},
			{schematype.OutcomeOutage, 4, []string{"Outage: the tool never ran (" + h.page + ": site unavailable (HTTP 503), after 4 attempts)"}},
			{schematype.OutcomeAbsence, 1, []string{"No match: the tool ran and found nothing (" + gone + ": page not found (HTTP 404))"}},
		}
		for i, tt := range tests {
			c := calls[i]
			require.Equal(t, tt.outcome, c.Outcome, *c.Heard)
			require.Equal(t, tt.attempts, c.Attempts, *c.Heard)
			heard := lastTool(p.request(i + 1)).Text
			require.Equal(t, *c.Heard, heard)
			for _, w := range tt.heard {
				require.Contains(t, heard, w)
			}
		}
		require.Equal(t, schematype.FailureOutage, calls[0].Failures[0].Kind, "the item is an outage too")

		// The next turn replays each call under its own outcome.
		p.mu.Lock()
		p.answers = []model.Response{{Text: "Still down."}}
		p.mu.Unlock()
		next := h.send(t, conv, "try again?", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, next).Status)
		var replayed []string
		for _, m := range p.request(4).Messages {
			if m.Role == model.RoleTool {
				replayed = append(replayed, m.Text[:strings.Index(m.Text, "]")+1])
			}
		}
		require.Equal(t, []string{"[OUTAGE]", "[OUTAGE]", "[ABSENCE]"}, replayed)
	})
}

// TestReadPageWindowCrossesWhole: the window read_page was asked for,
// within its cap, reaches the model whole, as read_document's and
// read_tool_result's do: the cap bounds it, not the preview.
func TestReadPageWindowCrossesWhole(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{}
		h := newHarness(t, d, p)
		h.client.Organization.Update().SetWebResearch(true).ExecX(tenancy.System(context.Background()))
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{call("r", "read_page", fmt.Sprintf(`{"url":%q,"maxChars":%d}`, h.longPage, web.ReadMaxChars))}},
			{Text: "Done."},
		}
		id := h.send(t, h.conversation(t, "read_page"), "read the tide tables", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

		c := h.calls(t, id)[0]
		require.Equal(t, schematype.OutcomeHits, c.Outcome, *c.Heard)
		heard := lastTool(p.request(1)).Text
		require.Greater(t, utf8.RuneCountInString(heard), preview.DefaultLimit, "larger than any preview")
		var read web.PageRead
		require.NoError(t, json.Unmarshal([]byte(heard), &read), heard)
		require.Equal(t, web.ReadMaxChars, utf8.RuneCountInString(read.Text), "the whole window")
		require.True(t, read.Truncated)
		require.NotContains(t, heard, "_toolResultContext")
		stored := h.client.StoredResult.GetX(tenancy.System(context.Background()), *c.ResultID)
		require.Equal(t, []schematype.Span{{Ref: *c.Ref, Start: 0, End: stored.Bytes}}, c.Evidence, "all of it was shown")
	})
}
