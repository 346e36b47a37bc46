package graph

import (
	"context"

	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph/auth"
)

// memoryViewer checks that the caller may run a memory tool on the
// conversation (a turn offered it; an API token naming a conversation it
// reaches) and returns the viewer whose memories it reaches: the person
// the turn talks to, or the token's own user.
func (r *Resolver) memoryViewer(ctx context.Context, tool string, conversationID *int) (*tenancy.Viewer, error) {
	if err := r.toolAllowed(ctx, tool, conversationID); err != nil {
		return nil, err
	}
	return auth.FromContext(ctx)
}
