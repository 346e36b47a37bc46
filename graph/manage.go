package graph

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/application"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/offer"
)

// adminViewer returns the caller when it is an admin holding an API token.
func adminViewer(ctx context.Context) (*auth.Viewer, error) {
	v, err := apiViewer(ctx)
	if err != nil {
		return nil, err
	}
	if !v.Admin {
		return nil, auth.ErrForbidden
	}
	return v, nil
}

func (r *Resolver) applications(ctx context.Context) ([]*ent.Application, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	return r.Client.Application.Query().Order(ent.Asc(application.FieldName), ent.Asc(application.FieldID)).All(ctx)
}

func (r *Resolver) updateApplication(ctx context.Context, in model.UpdateApplicationInput) (*model.UpdateApplicationPayload, error) {
	if _, err := adminViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	app, err := c.Application.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	next := model.RegisterApplicationInput{Name: app.Name, URL: app.URL, AllowedTools: app.AllowedTools}
	if in.URL != nil {
		next.URL = strings.TrimSpace(*in.URL)
	}
	if in.AllowedTools != nil {
		next.AllowedTools = in.AllowedTools
	}
	if err := checkApplication(next); err != nil {
		return nil, err
	}
	rules := in.Approvals
	if rules == nil {
		rules = keptRules(app.Approvals, uniq(next.AllowedTools))
	}
	kept, err := applicationRules(rules, uniq(next.AllowedTools))
	if err != nil {
		return nil, err
	}
	app, err = app.Update().SetURL(next.URL).SetAllowedTools(uniq(next.AllowedTools)).SetApprovals(kept).
		SetNillableDefaultApproval(in.DefaultApproval).Save(ctx)
	if err != nil {
		return nil, err
	}
	return &model.UpdateApplicationPayload{Application: app}, nil
}

func (r *Resolver) removeApplication(ctx context.Context, in model.RemoveApplicationInput) (*model.RemoveApplicationPayload, error) {
	if _, err := adminViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	app, err := c.Application.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if err := c.Application.DeleteOne(app).Exec(ctx); err != nil {
		return nil, err
	}
	return &model.RemoveApplicationPayload{ID: app.ID}, nil
}

// updateAgent changes what new turns of the agent get; a turn that has
// started keeps the agent it recorded when it first ran (the runtime's
// Turn.agent_config).
func (r *Resolver) updateAgent(ctx context.Context, in model.UpdateAgentInput) (*model.UpdateAgentPayload, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	a, err := c.Agent.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	next := offer.Agent{Tools: a.Tools, Memory: a.Memory, BudgetCheck: a.BudgetCheck, PastConversationSearch: a.PastConversationSearch}
	skills := a.Skills
	if in.Skills != nil {
		skills = in.Skills
	}
	if skills, next.Bound, err = r.checkSkills(ctx, a.OrganizationID, skills); err != nil {
		return nil, err
	}
	if in.Tools != nil {
		next.Tools = uniq(in.Tools)
	}
	if in.Memory != nil {
		next.Memory = *in.Memory
	}
	if in.BudgetCheck != nil {
		next.BudgetCheck = *in.BudgetCheck
	}
	if in.PastConversationSearch != nil {
		next.PastConversationSearch = *in.PastConversationSearch
	}
	// The same two checks as createAgent: every tool exists, and the deck
	// fits the widest ceiling.
	if err := r.checkTools(ctx, next.Tools); err != nil {
		return nil, err
	}
	if err := r.checkDeck(ctx, &next); err != nil {
		return nil, err
	}
	update := a.Update().SetTools(next.Tools).SetSkills(skills).SetMemory(next.Memory).SetBudgetCheck(next.BudgetCheck).
		SetPastConversationSearch(next.PastConversationSearch).SetNillableInstructions(in.Instructions).
		SetNillableToolLoading(in.ToolLoading)
	if in.KnowledgeBaseIds != nil {
		// The caller's organisation's, like createAgent's: any other id is
		// not found.
		kbs, err := r.checkKnowledgeBases(ctx, in.KnowledgeBaseIds)
		if err != nil {
			return nil, err
		}
		update.SetKnowledgeBaseIds(kbs)
	}
	if in.Name != nil {
		update.SetName(strings.TrimSpace(*in.Name))
	}
	if in.Approvals != nil || in.Tools != nil {
		rules := in.Approvals
		if rules == nil {
			rules = keptRules(a.Approvals, next.Tools)
		}
		kept, err := agentRules(rules, next.Tools)
		if err != nil {
			return nil, err
		}
		update.SetApprovals(kept)
	}
	if a, err = update.Save(ctx); err != nil {
		return nil, err
	}
	return &model.UpdateAgentPayload{Agent: a}, nil
}

func (r *Resolver) archiveConversation(ctx context.Context, in model.ArchiveConversationInput) (*model.ArchiveConversationPayload, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	conv, err := c.Conversation.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	switch archive := in.Archived == nil || *in.Archived; {
	case archive && conv.ArchivedAt == nil:
		conv, err = conv.Update().SetArchivedAt(r.now()).Save(ctx)
	case !archive && conv.ArchivedAt != nil:
		conv, err = conv.Update().ClearArchivedAt().Save(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &model.ArchiveConversationPayload{Conversation: conv}, nil
}

var errConversationBusy = inputErrorf("a turn of this conversation is running: cancel it first")

// deleteConversation deletes the conversation and every row it owns in the
// mutation's transaction. What it owns is read from the schema
// (db.ConversationOwned: every table with a conversation_id column or a
// foreign key to an owned row), so entities added later go with it too.
func (r *Resolver) deleteConversation(ctx context.Context, id int) (int, error) {
	if _, err := apiViewer(ctx); err != nil {
		return 0, err
	}
	c := r.client(ctx)
	// Loaded with the caller's context: out of reach is not found.
	conv, err := c.Conversation.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	running, err := c.Turn.Query().Where(turn.ConversationID(conv.ID), turn.StatusEQ(turn.StatusRUNNING)).Exist(ctx)
	if err != nil {
		return 0, err
	}
	if running {
		return 0, errConversationBusy
	}
	stmts, err := db.PurgeStatements(r.Dialect, conv.ID)
	if err != nil {
		return 0, err
	}
	if ent.TxFromContext(ctx) == nil {
		return 0, fmt.Errorf("delete conversation: no transaction")
	}
	for _, s := range stmts {
		if _, err := c.ExecContext(ctx, s.Query, s.Args...); err != nil {
			return 0, fmt.Errorf("delete conversation's %s: %w", s.Table, err)
		}
	}
	return conv.ID, nil
}

// DefaultTokenName names a new user's first API token.
const DefaultTokenName = "initial"

func (r *Resolver) createUser(ctx context.Context, in model.CreateUserInput) (*model.CreateUserPayload, error) {
	v, err := adminViewer(ctx)
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return nil, inputErrorf("name is empty")
	}
	c := r.client(ctx)
	u, err := c.User.Create().SetOrganizationID(v.OrganizationID).SetName(name).
		SetDepartment(strings.TrimSpace(deref(in.Department))).SetAdmin(deref(in.Admin)).Save(ctx)
	if err != nil {
		return nil, err
	}
	tokenName := DefaultTokenName
	if in.TokenName != nil && strings.TrimSpace(*in.TokenName) != "" {
		tokenName = strings.TrimSpace(*in.TokenName)
	}
	token, hash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	t, err := c.APIToken.Create().SetUserID(u.ID).SetName(tokenName).SetHash(hash).SetHint(auth.Hint(token)).Save(ctx)
	if err != nil {
		return nil, err
	}
	return &model.CreateUserPayload{User: u, Token: &model.CreatedAPIToken{Token: token, APIToken: t}}, nil
}

func (r *Resolver) deactivateUser(ctx context.Context, in model.DeactivateUserInput) (*model.DeactivateUserPayload, error) {
	v, err := adminViewer(ctx)
	if err != nil {
		return nil, err
	}
	c := r.client(ctx)
	u, err := c.User.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if u.ID == v.UserID {
		return nil, inputErrorf("an admin cannot deactivate themselves: ask another admin")
	}
	if u.DeactivatedAt == nil {
		// The authenticator reads the user with every token it resolves,
		// so the next request with any of their tokens is refused.
		if u, err = u.Update().SetDeactivatedAt(r.now()).Save(ctx); err != nil {
			return nil, err
		}
		// The turns this process runs for them stop vouching for their
		// scope tokens (Runner.Vouches), now and once this commits.
		r.Runner.Revoke(u.ID)
		if tx := ent.TxFromContext(ctx); tx != nil {
			id := u.ID
			tx.OnCommit(func(next ent.Committer) ent.Committer {
				return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
					err := next.Commit(ctx, tx)
					r.Runner.Revoke(id)
					return err
				})
			})
		}
	}
	return &model.DeactivateUserPayload{User: u}, nil
}

func (r *Resolver) users(ctx context.Context) ([]*ent.User, error) {
	if _, err := adminViewer(ctx); err != nil {
		return nil, err
	}
	return r.Client.User.Query().Order(ent.Asc(user.FieldName), ent.Asc(user.FieldID)).All(ctx)
}
