package main

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/db"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/auth"
)

// The demo organisation `make run` seeds on first start.
const (
	demoOrg        = "Demo Organisation"
	demoUser       = "Ada Lovelace"
	demoDepartment = "Research"
	demoAgent      = "Assistant"
)

// seedDemo makes the demo organisation, user and agent if they are missing
// and returns a new token for the demo user. On first start it also opens
// a demo conversation whose first turn the runtime answers (start then
// runs it), so the transcript in the playground is real runtime output.
func seedDemo(ctx context.Context, d *db.DB, now time.Time) (token string, turnID int, err error) {
	ctx = tenancy.System(ctx) // seeding acts for no viewer
	g, err := auth.Bootstrap(ctx, d.Client(), demoOrg, demoUser, demoDepartment)
	if err != nil {
		return "", 0, fmt.Errorf("seed demo: %w", err)
	}
	c := d.Client()
	n, err := c.Agent.Query().Where(agent.OrganizationID(g.OrganizationID), agent.Name(demoAgent)).Count(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("seed demo agent: %w", err)
	}
	if n > 0 {
		return g.Token, 0, nil
	}
	a, err := c.Agent.Create().
		SetOrganizationID(g.OrganizationID).
		SetName(demoAgent).
		SetInstructions("You are a careful assistant for the Demo Organisation. Answer briefly and show your working.").
		SetTools([]string{"update_tasks", "search_tools", "list_tools", "get_tool_schema"}).
		Save(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("seed demo agent: %w", err)
	}
	conv, err := c.Conversation.Create().SetOrganizationID(g.OrganizationID).SetUserID(g.UserID).
		SetAgentID(a.ID).SetTitle("Budget estimate").Save(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("seed demo conversation: %w", err)
	}
	t, err := c.Turn.Create().SetConversationID(conv.ID).SetNumber(1).SetStartedAt(now).SetTimeZone("Europe/London").
		SetUserText("What do 1,200 and 850 come to with a 20% markup?").Save(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("seed demo turn: %w", err)
	}
	return g.Token, t.ID, nil
}
