package dbtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// Tenant is what most tests stand on: an organisation ("Acme") with a
// person ("Alice"), an agent ("Helper") and one conversation of hers.
type Tenant struct {
	Org, User, Agent, Conversation int
}

// Seed writes a Tenant with c, as the system (no viewer is needed to
// seed).
func Seed(t testing.TB, c *ent.Client) Tenant {
	t.Helper()
	ctx := tenancy.System(context.Background())
	org, err := c.Organization.Create().SetName("Acme").Save(ctx)
	require.NoError(t, err)
	u, err := c.User.Create().SetOrganizationID(org.ID).SetName("Alice").Save(ctx)
	require.NoError(t, err)
	a, err := c.Agent.Create().SetOrganizationID(org.ID).SetName("Helper").Save(ctx)
	require.NoError(t, err)
	s := Tenant{Org: org.ID, User: u.ID, Agent: a.ID}
	s.Conversation = s.NewConversation(t, c)
	return s
}

// NewConversation starts another conversation of the tenant's person with
// its agent.
func (s Tenant) NewConversation(t testing.TB, c *ent.Client) int {
	t.Helper()
	conv, err := c.Conversation.Create().SetOrganizationID(s.Org).SetUserID(s.User).SetAgentID(s.Agent).
		Save(tenancy.System(context.Background()))
	require.NoError(t, err)
	return conv.ID
}

// NewTurn adds turn number n to conversation conv, with a user text.
func NewTurn(t testing.TB, c *ent.Client, conv, n int) int {
	t.Helper()
	turn, err := c.Turn.Create().SetConversationID(conv).SetNumber(n).SetUserText("hi").
		Save(tenancy.System(context.Background()))
	require.NoError(t, err)
	return turn.ID
}
