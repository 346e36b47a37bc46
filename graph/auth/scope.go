package auth

import (
	"context"

	"entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/apitoken"
	"github.com/toolgate/toolgate/ent/application"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/idempotentresponse"
	"github.com/toolgate/toolgate/ent/intercept"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/organization"
	"github.com/toolgate/toolgate/ent/predicate"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/user"
)

// Scope installs on client the interceptors that limit every query to the
// viewer in its context. A query with no viewer fails with ErrNotFound:
// the client that serves the API never runs unscoped.
//
// Interceptors cover reads. Mutations in the API first load what they
// change through this client, so they too act only on rows in scope.
func Scope(client *ent.Client) {
	scopeByConversation(client)
	client.Organization.Intercept(intercept.TraverseOrganization(func(ctx context.Context, q *ent.OrganizationQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(organization.ID(v.OrganizationID))
		return nil
	}))
	client.User.Intercept(intercept.TraverseUser(func(ctx context.Context, q *ent.UserQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(user.OrganizationID(v.OrganizationID))
		return nil
	}))
	client.APIToken.Intercept(intercept.TraverseAPIToken(func(ctx context.Context, q *ent.APITokenQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		if v.Admin && !v.Scoped() {
			q.Where(apitoken.HasUserWith(user.OrganizationID(v.OrganizationID)))
		} else {
			q.Where(apitoken.UserID(v.UserID))
		}
		return nil
	}))
	client.Agent.Intercept(intercept.TraverseAgent(func(ctx context.Context, q *ent.AgentQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(agent.OrganizationID(v.OrganizationID))
		return nil
	}))
	client.Application.Intercept(intercept.TraverseApplication(func(ctx context.Context, q *ent.ApplicationQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(application.OrganizationID(v.OrganizationID))
		return nil
	}))
	client.Conversation.Intercept(intercept.TraverseConversation(func(ctx context.Context, q *ent.ConversationQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(conversationScope(v)...)
		return nil
	}))
	client.Turn.Intercept(intercept.TraverseTurn(func(ctx context.Context, q *ent.TurnQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(turn.HasConversationWith(conversationScope(v)...))
		return nil
	}))
	client.ToolCall.Intercept(intercept.TraverseToolCall(func(ctx context.Context, q *ent.ToolCallQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(toolcall.HasTurnWith(turn.HasConversationWith(conversationScope(v)...)))
		return nil
	}))
	client.StoredResult.Intercept(intercept.TraverseStoredResult(func(ctx context.Context, q *ent.StoredResultQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(storedresult.HasConversationWith(conversationScope(v)...))
		return nil
	}))
	client.IdempotentResponse.Intercept(intercept.TraverseIdempotentResponse(func(ctx context.Context, q *ent.IdempotentResponseQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(idempotentresponse.OrganizationID(v.OrganizationID), idempotentresponse.Scope(v.IdempotencyScope()))
		return nil
	}))
	client.ModelCall.Intercept(intercept.TraverseModelCall(func(ctx context.Context, q *ent.ModelCallQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(modelcall.OrganizationID(v.OrganizationID))
		if !v.Admin || v.Scoped() {
			q.Where(modelcall.UserID(v.UserID))
		}
		return nil
	}))
}

// conversationScope is the viewer's reach in conversations; turns, tool
// calls and results are in scope exactly when their conversation is.
func conversationScope(v *Viewer) []predicate.Conversation {
	ps := []predicate.Conversation{conversation.OrganizationID(v.OrganizationID)}
	if v.Scoped() {
		ps = append(ps, conversation.ID(v.ConversationID))
	} else if !v.Admin {
		ps = append(ps, conversation.UserID(v.UserID))
	}
	return ps
}

// inScopeConversations is a predicate on a table with a conversation_id
// column: the row belongs to a conversation the viewer reaches. It guards
// the types that keep a plain conversation id rather than an edge.
func inScopeConversations(v *Viewer) func(*sql.Selector) {
	return func(s *sql.Selector) {
		t := sql.Table(conversation.Table)
		sub := sql.Select(t.C(conversation.FieldID)).From(t).
			Where(sql.EQ(t.C(conversation.FieldOrganizationID), v.OrganizationID))
		if v.Scoped() {
			sub.Where(sql.EQ(t.C(conversation.FieldID), v.ConversationID))
		} else if !v.Admin {
			sub.Where(sql.EQ(t.C(conversation.FieldUserID), v.UserID))
		}
		s.Where(sql.In(s.C("conversation_id"), sub))
	}
}

// scopeByConversation installs the guard for the workspace and task types.
func scopeByConversation(client *ent.Client) {
	client.WorkspaceFile.Intercept(intercept.TraverseWorkspaceFile(func(ctx context.Context, q *ent.WorkspaceFileQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(predicate.WorkspaceFile(inScopeConversations(v)))
		return nil
	}))
	client.Task.Intercept(intercept.TraverseTask(func(ctx context.Context, q *ent.TaskQuery) error {
		v, err := FromContext(ctx)
		if err != nil {
			return err
		}
		q.Where(predicate.Task(inScopeConversations(v)))
		return nil
	}))
}
