package graph

import (
	"context"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/skill"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/tools"
	skills "github.com/toolgate/toolgate/tools/skill"
)

// checkSkills checks the skill names an agent of org is to bind, and
// returns them (sorted, without repeats) with what load_skill's
// description will name.
func (r *Resolver) checkSkills(ctx context.Context, org int, names []string) ([]string, tools.Bound, error) {
	for _, n := range names {
		if err := skills.CheckName(n); err != nil {
			return nil, tools.Bound{}, err
		}
	}
	c := r.client(ctx)
	names, err := skills.CheckBound(ctx, c, names)
	if err != nil {
		return nil, tools.Bound{}, err
	}
	briefs, err := skills.Briefs(ctx, c, org, names)
	return names, tools.Bound{Skills: briefs}, err
}

func (r *Resolver) publishSkill(ctx context.Context, in model.PublishSkillInput) (*ent.Skill, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	if v.Scoped() || !v.Admin {
		return nil, auth.ErrForbidden
	}
	return skills.Publish(ctx, r.client(ctx), v.OrganizationID, v.UserID,
		skills.Published{Name: in.Name, Description: in.Description, Instructions: in.Instructions})
}

func (r *Resolver) skills(ctx context.Context) ([]*ent.Skill, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	return r.Client.Skill.Query().Order(ent.Asc(skill.FieldName)).All(ctx)
}

// loadSkill answers load_skill: a skill the agent binds, whole. A turn
// loads from the skills its agent bound when the turn started.
func (r *Resolver) loadSkill(ctx context.Context, conversationID *int, name string) (*model.LoadedSkill, error) {
	conv, err := r.toolConversation(ctx, skills.Load.Name, conversationID)
	if err != nil {
		return nil, err
	}
	bound, err := r.boundSkills(ctx, conv)
	if err != nil {
		return nil, err
	}
	s, err := skills.Find(ctx, r.Client, conv.OrganizationID, bound, name)
	if err != nil {
		return nil, err
	}
	return &model.LoadedSkill{Name: s.Name, Instructions: s.Instructions}, nil
}

// boundSkills is what the conversation's agent binds: as the calling turn
// recorded it, or as the agent is now for an API token.
func (r *Resolver) boundSkills(ctx context.Context, conv *ent.Conversation) ([]string, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	if v.Scoped() {
		t, err := r.Client.Turn.Get(ctx, v.TurnID)
		if err != nil {
			return nil, err
		}
		if t.AgentConfig != nil {
			return t.AgentConfig.Skills, nil
		}
	}
	a, err := r.Client.Agent.Get(ctx, conv.AgentID)
	if err != nil {
		return nil, err
	}
	return a.Skills, nil
}
