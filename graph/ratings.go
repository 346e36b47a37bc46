package graph

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/turnrating"
	"github.com/toolgate/toolgate/graph/loader"
	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/runtime/events"
)

// MaxRatingCommentChars bounds a rating's comment.
const MaxRatingCommentChars = 2000

// regenerateTurn answers the conversation's last turn again: sendMessage
// with its text and time zone (so every check of a new message holds:
// archived, busy, budget), then the earlier turn marked superseded, in the
// same transaction.
func (r *Resolver) regenerateTurn(ctx context.Context, id int) (*ent.Turn, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	t, err := c.Turn.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	last, err := c.Turn.Query().Where(turn.ConversationID(t.ConversationID)).Order(ent.Desc(turn.FieldNumber)).First(ctx)
	if err != nil {
		return nil, err
	}
	if last.ID != t.ID {
		return nil, inputErrorf("turn %d is not the conversation's last (turn %d is): only the last turn is answered again", t.Number, last.Number)
	}
	zone := t.TimeZone
	next, err := r.sendMessage(ctx, model.SendMessageInput{ConversationID: t.ConversationID, Text: t.UserText, TimeZone: &zone})
	if err != nil {
		return nil, err
	}
	if err := c.Turn.UpdateOneID(t.ID).SetSuperseded(true).Exec(ctx); err != nil {
		return nil, err
	}
	return next, nil
}

// rateTurn gives or changes the caller's rating of a turn that has ended.
func (r *Resolver) rateTurn(ctx context.Context, in model.RateTurnInput) (*ent.Turn, error) {
	v, err := apiViewer(ctx)
	if err != nil {
		return nil, err
	}
	comment := ""
	if in.Comment != nil {
		comment = strings.TrimSpace(*in.Comment)
	}
	if n := utf8.RuneCountInString(comment); n > MaxRatingCommentChars {
		return nil, inputErrorf("comment: %d characters, at most %d", n, MaxRatingCommentChars)
	}
	c := r.client(ctx)
	t, err := c.Turn.Get(ctx, in.TurnID)
	if err != nil {
		return nil, err
	}
	if !events.Ended(t.Status) {
		return nil, inputErrorf("the turn is %s: rate it once it has ended", strings.ToLower(string(t.Status)))
	}
	rating := turnrating.Rating(in.Rating)
	old, err := c.TurnRating.Query().Where(turnrating.TurnID(t.ID), turnrating.UserID(v.UserID)).Only(ctx)
	switch {
	case err == nil:
		err = old.Update().SetRating(rating).SetComment(comment).Exec(ctx)
	case ent.IsNotFound(err):
		var conv *ent.Conversation
		if conv, err = c.Conversation.Get(ctx, t.ConversationID); err != nil {
			return nil, err
		}
		err = c.TurnRating.Create().SetOrganizationID(conv.OrganizationID).SetUserID(v.UserID).SetTurnID(t.ID).
			SetAgentID(conv.AgentID).SetRating(rating).SetComment(comment).Exec(ctx)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// myRating is the caller's own rating among the turn's, which the caller
// may always read: one loader answers both fields.
func (r *Resolver) myRating(ctx context.Context, t *ent.Turn) (*ent.TurnRating, error) {
	v, err := apiViewer(ctx)
	if err != nil {
		return nil, nil //nolint:nilerr // a scope token rates nothing
	}
	all, err := ratingsOf(ctx, t)
	if err != nil {
		return nil, err
	}
	for _, tr := range all {
		if tr.UserID == v.UserID {
			return tr, nil
		}
	}
	return nil, nil
}

func (r *Resolver) turnRatings(ctx context.Context, t *ent.Turn) ([]*ent.TurnRating, error) {
	if _, err := apiViewer(ctx); err != nil {
		return []*ent.TurnRating{}, nil //nolint:nilerr // a scope token reads no ratings
	}
	return ratingsOf(ctx, t)
}

// ratingsOf reads a turn's ratings through the request's loader, or, in a
// mutation's answer (rateTurn's), through its transaction: the loader
// reads outside it and would not see what the mutation wrote.
func ratingsOf(ctx context.Context, t *ent.Turn) ([]*ent.TurnRating, error) {
	if tx := ent.FromContext(ctx); tx != nil {
		return tx.TurnRating.Query().Where(turnrating.TurnID(t.ID)).
			Order(ent.Desc(turnrating.FieldUpdatedAt), ent.Asc(turnrating.FieldID)).All(ctx)
	}
	return loader.For(ctx).Ratings(ctx, t)
}

func (r *Resolver) ratingUser(ctx context.Context, tr *ent.TurnRating) (*ent.User, error) {
	if tx := ent.FromContext(ctx); tx != nil {
		u, err := tx.User.Get(ctx, tr.UserID)
		if ent.IsNotFound(err) {
			return nil, nil
		}
		return u, err
	}
	return loader.For(ctx).UserByID.Load(ctx, tr.UserID)()
}

// ratingsComments is how many commented ratings the summary lists.
const ratingsComments = 20

// ratings sums the ratings given (or last changed) in a month, by agent and
// by the model of the turn's first model call.
func (r *Resolver) ratings(ctx context.Context, month *string) (*model.RatingSummary, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	start, end, err := monthRange(month, r.now())
	if err != nil {
		return nil, err
	}
	all, err := r.Client.TurnRating.Query().
		Where(turnrating.UpdatedAtGTE(start), turnrating.UpdatedAtLT(end)).
		Order(ent.Desc(turnrating.FieldUpdatedAt)).All(ctx)
	if err != nil {
		return nil, err
	}
	out := &model.RatingSummary{Month: start.Format("2006-01"), ByAgent: []*model.AgentRatings{}, ByModel: []*model.ModelRatings{}, Comments: []*model.RatedTurn{}}
	turnIDs, agentIDs := make([]int, 0, len(all)), make([]int, 0, len(all))
	for _, tr := range all {
		turnIDs, agentIDs = append(turnIDs, tr.TurnID), append(agentIDs, tr.AgentID)
	}
	calls, err := r.Client.ModelCall.Query().
		Where(modelcall.TurnIDIn(turnIDs...), modelcall.KindEQ(modelcall.KindSTEP), modelcall.Step(0)).
		Select(modelcall.FieldTurnID, modelcall.FieldModel).All(ctx)
	if err != nil {
		return nil, err
	}
	modelOf := make(map[int]string, len(calls))
	for _, mc := range calls {
		modelOf[mc.TurnID] = mc.Model
	}
	agents, err := r.Client.Agent.Query().Where(agent.IDIn(agentIDs...)).All(ctx)
	if err != nil {
		return nil, err
	}
	agentByID := byID(agents, func(a *ent.Agent) int { return a.ID })
	byAgent := map[int]*model.AgentRatings{}
	byModel := map[string]*model.ModelRatings{}
	var commented []*ent.TurnRating
	for _, tr := range all {
		a := byAgent[tr.AgentID]
		if a == nil {
			a = &model.AgentRatings{Agent: agentByID[tr.AgentID]}
			byAgent[tr.AgentID] = a
			out.ByAgent = append(out.ByAgent, a)
		}
		name := modelOf[tr.TurnID]
		m := byModel[name]
		if m == nil {
			m = &model.ModelRatings{Model: name}
			byModel[name] = m
			out.ByModel = append(out.ByModel, m)
		}
		if tr.Rating == turnrating.RatingUP {
			out.Up, a.Up, m.Up = out.Up+1, a.Up+1, m.Up+1
		} else {
			out.Down, a.Down, m.Down = out.Down+1, a.Down+1, m.Down+1
		}
		if tr.Comment != "" && len(commented) < ratingsComments {
			commented = append(commented, tr)
		}
	}
	slices.SortStableFunc(out.ByAgent, func(a, b *model.AgentRatings) int { return cmp.Compare(b.Up+b.Down, a.Up+a.Down) })
	slices.SortStableFunc(out.ByModel, func(a, b *model.ModelRatings) int { return cmp.Compare(b.Up+b.Down, a.Up+a.Down) })
	ids := make([]int, len(commented))
	for i, tr := range commented {
		ids[i] = tr.TurnID
	}
	turns, err := r.Client.Turn.Query().Where(turn.IDIn(ids...)).All(ctx)
	if err != nil {
		return nil, err
	}
	turnByID := byID(turns, func(t *ent.Turn) int { return t.ID })
	for _, tr := range commented {
		if t := turnByID[tr.TurnID]; t != nil {
			out.Comments = append(out.Comments, &model.RatedTurn{Rating: tr, Turn: t})
		}
	}
	return out, nil
}
