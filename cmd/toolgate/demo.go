package main

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/db"
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
// and returns a new token for the demo user.
func seedDemo(ctx context.Context, d *db.DB) (string, error) {
	g, err := auth.Bootstrap(ctx, d.Client(), demoOrg, demoUser, demoDepartment)
	if err != nil {
		return "", fmt.Errorf("seed demo: %w", err)
	}
	c := d.Client()
	n, err := c.Agent.Query().Where(agent.OrganizationID(g.OrganizationID), agent.Name(demoAgent)).Count(ctx)
	if err != nil {
		return "", fmt.Errorf("seed demo agent: %w", err)
	}
	if n == 0 {
		_, err = c.Agent.Create().
			SetOrganizationID(g.OrganizationID).
			SetName(demoAgent).
			SetInstructions("You are a careful assistant for the Demo Organisation. Answer briefly and show your working.").
			Save(ctx)
		if err != nil {
			return "", fmt.Errorf("seed demo agent: %w", err)
		}
	}
	return g.Token, nil
}
