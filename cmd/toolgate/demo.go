package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/agent"
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
// and returns a token for the demo user: the one kept in tokenFile while it
// still works, else a new one, then kept there. On first start it also opens
// a demo conversation whose first turn the runtime answers (start then
// runs it), so the transcript in the playground is real runtime output.
func seedDemo(ctx context.Context, d *db.DB, now time.Time, tokenFile string) (token string, turnID int, err error) {
	ctx = tenancy.System(ctx) // seeding acts for no viewer
	g, err := demoGrant(ctx, d, tokenFile)
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

// demoGrant reuses the demo token kept in tokenFile when it still
// authenticates the demo user, so that every start of `make run` does not
// add a token that never expires.
func demoGrant(ctx context.Context, d *db.DB, tokenFile string) (*auth.Grant, error) {
	if raw, err := os.ReadFile(tokenFile); err == nil {
		token := strings.TrimSpace(string(raw))
		v, err := auth.NewAuthenticator(d.Client(), slog.New(slog.DiscardHandler)).Resolve(ctx, token)
		if err == nil {
			u, err := d.Client().User.Get(ctx, v.UserID)
			if err == nil && u.Name == demoUser {
				return &auth.Grant{Token: token, OrganizationID: v.OrganizationID, UserID: v.UserID}, nil
			}
		}
	}
	g, err := auth.Bootstrap(ctx, d.Client(), demoOrg, demoUser, demoDepartment)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(tokenFile), 0o750); err != nil {
		return nil, fmt.Errorf("keep demo token: %w", err)
	}
	if err := os.WriteFile(tokenFile, []byte(g.Token+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("keep demo token: %w", err)
	}
	return g, nil
}

// demoTokenFile is where the demo token is kept: beside the SQLite file, or
// in ./data for PostgreSQL.
func demoTokenFile(dbURL string) string {
	dir := filepath.Dir(db.DefaultPath)
	for _, prefix := range []string{"sqlite://", "file:"} {
		if p, ok := strings.CutPrefix(dbURL, prefix); ok {
			p, _, _ = strings.Cut(p, "?")
			dir = filepath.Dir(p)
		}
	}
	return filepath.Join(dir, "demo-token")
}
