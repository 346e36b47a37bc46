package graph

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/document"
	"github.com/toolgate/toolgate/ent/documentchunk"
	"github.com/toolgate/toolgate/graph/model"
)

// Deleting what an agent binds (a knowledge base, a skill) is refused while
// an agent binds it, naming the agents, rather than unbinding it silently:
// an agent's answers would change under its users without anyone choosing
// it. The admin unbinds with updateAgent, then deletes.

// archiveAgent archives an agent (no new conversations) or brings it back.
func (r *Resolver) archiveAgent(ctx context.Context, id int, archived *bool) (*ent.Agent, error) {
	if _, err := adminViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	a, err := c.Agent.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	switch archive := archived == nil || *archived; {
	case archive && a.ArchivedAt == nil:
		return a.Update().SetArchivedAt(r.now()).Save(ctx)
	case !archive && a.ArchivedAt != nil:
		return a.Update().ClearArchivedAt().Save(ctx)
	}
	return a, nil
}

// deleteAgent deletes an agent no conversation refers to.
func (r *Resolver) deleteAgent(ctx context.Context, id int) (int, error) {
	if _, err := adminViewer(ctx); err != nil {
		return 0, err
	}
	c := r.client(ctx)
	a, err := c.Agent.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	n, err := c.Conversation.Query().Where(conversation.AgentID(a.ID)).Count(ctx)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		return 0, inputErrorf("the agent %q has %s: archive it instead (archiveAgent), or delete them first", a.Name, count(n, "conversation"))
	}
	if err := c.Agent.DeleteOneID(a.ID).Exec(ctx); err != nil {
		return 0, err
	}
	return a.ID, nil
}

// renameConversation sets a conversation's title.
func (r *Resolver) renameConversation(ctx context.Context, in model.RenameConversationInput) (*ent.Conversation, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	conv, err := c.Conversation.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	title := strings.TrimSpace(in.Title)
	if n := len([]rune(title)); n > 500 {
		return nil, inputErrorf("title: %d characters, at most 500", n)
	}
	if title == "" {
		return conv.Update().ClearTitle().Save(ctx)
	}
	return conv.Update().SetTitle(title).Save(ctx)
}

// reactivateUser lets a deactivated user's tokens work again.
func (r *Resolver) reactivateUser(ctx context.Context, in model.ReactivateUserInput) (*model.ReactivateUserPayload, error) {
	if _, err := adminViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	u, err := c.User.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if u.DeactivatedAt != nil {
		if u, err = u.Update().ClearDeactivatedAt().Save(ctx); err != nil {
			return nil, err
		}
	}
	return &model.ReactivateUserPayload{User: u}, nil
}

// setUserRole makes a user an admin or a member; never the caller, so an
// organisation always keeps the admin who asked.
func (r *Resolver) setUserRole(ctx context.Context, in model.SetUserRoleInput) (*model.SetUserRolePayload, error) {
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
		return nil, inputErrorf("an admin cannot change their own role: ask another admin")
	}
	if u.Admin != in.Admin {
		if u, err = u.Update().SetAdmin(in.Admin).Save(ctx); err != nil {
			return nil, err
		}
	}
	return &model.SetUserRolePayload{User: u}, nil
}

// deleteKnowledgeBase deletes a knowledge base no agent binds, with its
// documents and their passages.
func (r *Resolver) deleteKnowledgeBase(ctx context.Context, in model.DeleteKnowledgeBaseInput) (*model.DeleteKnowledgeBasePayload, error) {
	if _, err := adminViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	kb, err := c.KnowledgeBase.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	agents, err := c.Agent.Query().Order(ent.Asc(agent.FieldName)).All(ctx)
	if err != nil {
		return nil, err
	}
	if users := binders(agents, func(a *ent.Agent) bool { return slices.Contains(a.KnowledgeBaseIds, kb.ID) }); users != "" {
		return nil, inputErrorf("the knowledge base %q is bound to %s: unbind it first (updateAgent knowledgeBaseIds)", kb.Name, users)
	}
	docs, err := c.Document.Query().Where(document.KnowledgeBaseID(kb.ID)).IDs(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.deleteDocuments(ctx, docs); err != nil {
		return nil, err
	}
	if err := c.KnowledgeBase.DeleteOneID(kb.ID).Exec(ctx); err != nil {
		return nil, err
	}
	return &model.DeleteKnowledgeBasePayload{DeletedID: kb.ID, Documents: len(docs)}, nil
}

// deleteDocument deletes a document and its passages.
func (r *Resolver) deleteDocument(ctx context.Context, in model.DeleteDocumentInput) (*model.DeleteDocumentPayload, error) {
	if _, err := adminViewer(ctx); err != nil {
		return nil, err
	}
	d, err := r.client(ctx).Document.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if err := r.deleteDocuments(ctx, []int{d.ID}); err != nil {
		return nil, err
	}
	return &model.DeleteDocumentPayload{DeletedID: d.ID}, nil
}

// deleteDocuments deletes documents with their chunks in the mutation's
// transaction, and their passages from the search index once it commits.
func (r *Resolver) deleteDocuments(ctx context.Context, ids []int) error {
	if len(ids) == 0 {
		return nil
	}
	c := r.client(ctx)
	chunks, err := c.DocumentChunk.Query().Where(documentchunk.DocumentIDIn(ids...)).IDs(ctx)
	if err != nil {
		return fmt.Errorf("find passages: %w", err)
	}
	if _, err := c.DocumentChunk.Delete().Where(documentchunk.DocumentIDIn(ids...)).Exec(ctx); err != nil {
		return fmt.Errorf("delete passages: %w", err)
	}
	if _, err := c.Document.Delete().Where(document.IDIn(ids...)).Exec(ctx); err != nil {
		return fmt.Errorf("delete documents: %w", err)
	}
	if r.Documents == nil || len(chunks) == 0 {
		return nil
	}
	forget := func(ctx context.Context) {
		if err := r.Documents.ForgetPassages(ctx, chunks...); err != nil {
			r.Log.ErrorContext(ctx, "forget deleted passages", "err", err)
		}
	}
	tx := ent.TxFromContext(ctx)
	if tx == nil {
		forget(ctx)
		return nil
	}
	tx.OnCommit(func(next ent.Committer) ent.Committer {
		return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
			err := next.Commit(ctx, tx)
			if err == nil {
				forget(context.WithoutCancel(ctx))
			}
			return err
		})
	})
	return nil
}

// deleteSkill deletes a published skill no agent lists.
func (r *Resolver) deleteSkill(ctx context.Context, in model.DeleteSkillInput) (*model.DeleteSkillPayload, error) {
	if _, err := adminViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	s, err := c.Skill.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	agents, err := c.Agent.Query().Order(ent.Asc(agent.FieldName)).All(ctx)
	if err != nil {
		return nil, err
	}
	if users := binders(agents, func(a *ent.Agent) bool { return slices.Contains(a.Skills, s.Name) }); users != "" {
		return nil, inputErrorf("the skill %q is listed by %s: take it out of their skills first (updateAgent skills)", s.Name, users)
	}
	if err := c.Skill.DeleteOneID(s.ID).Exec(ctx); err != nil {
		return nil, err
	}
	return &model.DeleteSkillPayload{DeletedID: s.ID}, nil
}

// binders names the agents that bind something: `the agent "A"`, or
// `3 agents: "A", "B", "C"`; empty when none does.
func binders(agents []*ent.Agent, binds func(*ent.Agent) bool) string {
	var names []string
	for _, a := range agents {
		if binds(a) {
			names = append(names, fmt.Sprintf("%q", a.Name))
		}
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "the agent " + names[0]
	}
	return fmt.Sprintf("%d agents: %s", len(names), strings.Join(names, ", "))
}

// count says n things in English: "1 conversation", "2 conversations".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
