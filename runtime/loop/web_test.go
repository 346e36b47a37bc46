package loop_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
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
