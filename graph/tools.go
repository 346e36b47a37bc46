package graph

import (
	"context"
	"fmt"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/artifactversion"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/registry"
	"github.com/toolgate/toolgate/tools/web"
)

// toolConversation returns the conversation a tool operation works on. A
// turn's scope token names it, and may drive only the tools it was offered;
// an API token (the playground) names it with conversationId. Either way it
// is read through the scoped client: another's is not found.
func (r *Resolver) toolConversation(ctx context.Context, tool string, id *int) (*ent.Conversation, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case v.Scoped():
		if !v.Offers(tool) || (id != nil && *id != v.ConversationID) {
			return nil, auth.ErrNotFound
		}
		return r.Client.Conversation.Get(ctx, v.ConversationID)
	case id == nil:
		return nil, inputErrorf("conversationId is required with an API token")
	default:
		return r.Client.Conversation.Get(ctx, *id)
	}
}

// toolAllowed is toolConversation for a tool that needs no more than the
// check: a scope token's conversation was checked when its viewer was made
// (scopeResolver), so it costs no statement; an API token's is read.
func (r *Resolver) toolAllowed(ctx context.Context, tool string, id *int) error {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return err
	}
	if v.Scoped() {
		if !v.Offers(tool) || (id != nil && *id != v.ConversationID) {
			return auth.ErrNotFound
		}
		return nil
	}
	_, err = r.toolConversation(ctx, tool, id)
	return err
}

// webEnabled refuses a web tool unless the conversation's organisation has
// the server's web provider enabled: an admin may turn it off mid-turn.
func (r *Resolver) webEnabled(ctx context.Context, tool string, id *int) error {
	conv, err := r.toolConversation(ctx, tool, id)
	if err != nil {
		return err
	}
	org, err := r.Client.Organization.Get(ctx, conv.OrganizationID)
	if err != nil {
		return fmt.Errorf("load organization: %w", err)
	}
	if !r.Web.Enabled(org) {
		return web.ErrNotEnabled
	}
	return nil
}

// scopeGuard keeps a turn's scope token to the tool fields: it opens no
// other part of the API.
func scopeGuard(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	v, err := auth.FromContext(ctx)
	if err != nil || !v.Scoped() {
		return next(ctx)
	}
	fc := graphql.GetRootFieldContext(ctx)
	if fc == nil {
		return next(ctx)
	}
	tool, ok := toolFields[fc.Field.Name]
	if ok && v.Offers(tool) || fc.Field.Name == "__typename" {
		return next(ctx)
	}
	graphql.AddError(ctx, auth.ErrNotFound)
	return graphql.Null
}

var toolFields = registry.Fields()

// scopeResolver turns a scope token into a viewer, for as long as its turn
// runs: a token outlives neither its expiry nor its turn.
func scopeResolver(client *ent.Client, signer *scope.Signer, runner *loop.Runner) func(context.Context, string) (*auth.Viewer, error) {
	return func(ctx context.Context, token string) (*auth.Viewer, error) {
		c, err := signer.Verify(token)
		if err != nil {
			return nil, auth.ErrNotFound
		}
		viewer := &auth.Viewer{
			OrganizationID: c.OrganizationID,
			UserID:         c.UserID,
			ConversationID: c.ConversationID,
			TurnID:         c.TurnID,
			Tools:          c.Tools,
		}
		// The runner of this process has the turn's calls in flight: it
		// runs, it is claimed here, its user was read active moments ago.
		// No statement for what the signed token and the runner say.
		if runner.Vouches(c.TurnID, c.ConversationID, c.UserID) {
			return viewer, nil
		}
		n, err := client.Turn.Query().
			Where(turn.ID(c.TurnID), turn.ConversationID(c.ConversationID), turn.StatusEQ(turn.StatusRUNNING),
							// A deactivated user's turns lose their tokens at once too.
							turn.HasConversationWith(conversation.HasUserWith(user.DeactivatedAtIsNil()))).
			Count(tenancy.System(ctx)) // no viewer yet: this check makes it
		if err != nil {
			return nil, fmt.Errorf("check turn: %w", err)
		}
		if n == 0 {
			return nil, auth.ErrNotFound
		}
		runner.Confirm(c.TurnID, c.UserID)
		return viewer, nil
	}
}

// turnTime is the clock a tool may show: the start of the scope token's
// turn, or now for an API token (the playground).
func (r *Resolver) turnTime(ctx context.Context) (time.Time, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if !v.Scoped() {
		return r.now(), nil
	}
	t, err := r.Client.Turn.Get(ctx, v.TurnID)
	if err != nil {
		return time.Time{}, fmt.Errorf("load turn: %w", err)
	}
	return t.StartedAt, nil
}

// runCode is run_code's resolver, apart from the generated file whose
// argument named code hides the package.
func (r *Resolver) runCode(ctx context.Context, conversationID *int, src string, refs []string) (*code.Result, error) {
	conv, err := r.toolConversation(ctx, code.RunCode.Name, conversationID)
	if err != nil {
		return nil, err
	}
	now, err := r.turnTime(ctx)
	if err != nil {
		return nil, err
	}
	return r.Sandbox.Run(ctx, r.client(ctx), conv.ID, code.Input{Code: src, ToolResults: refs, Now: now})
}

// checkDeck refuses an agent whose turns would carry more tool definitions
// than the widest ceiling allows: its built-in tools and its allowlisted
// application tools, measured as their servers list them. A server that
// cannot be asked is not measured here; the catalogue warns about it.
func (r *Resolver) checkDeck(ctx context.Context, a *offer.Agent) error {
	apps, err := catalog.Applications(ctx, r.client(ctx), a, r.lister())
	if err != nil {
		return err
	}
	if err := catalog.Measure(registry.All()).For(a).WithApplications(a, apps).CheckDeck(); err != nil {
		return inputErrorf("tools: %v", err)
	}
	return nil
}

// artifactVersions returns an artifact's versions in order: as loaded with
// it (artifacts loads them in one query), or read now.
func (r *Resolver) artifactVersions(ctx context.Context, a *ent.Artifact) ([]*ent.ArtifactVersion, error) {
	if vs, err := a.Edges.VersionsOrErr(); err == nil {
		return vs, nil
	}
	return r.Client.ArtifactVersion.Query().
		Where(artifactversion.ArtifactID(a.ID)).
		Order(ent.Asc(artifactversion.FieldNumber)).
		All(ctx)
}

// turnTools is what the discovery tools answer for: a turn's own tool list
// (its scope token's) when a turn asks, else nil, the agent's rules.
func turnTools(ctx context.Context) func(name string) bool {
	if v, err := auth.FromContext(ctx); err == nil && v.Scoped() {
		return v.Offers
	}
	return nil
}
