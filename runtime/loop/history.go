package loop

import (
	"context"
	"maps"
	"slices"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/store"
)

// history builds the messages: the summaries that stand for the oldest
// earlier turns, the turns after them, this turn's message, and the steps
// this turn already took. It returns how many model calls were made. With
// compact, a turn that has made no model call yet first summarises the
// oldest turns when the history passes its budget (compaction); a turn
// under way keeps the history it started with.
func (t *turnRun) history(ctx context.Context, compact bool) (int, error) {
	past, err := t.r.store.ReadPast(ctx, store.Of{Conversation: t.conv.ID, Number: t.turn.Number, Turn: t.turnID,
		Organization: t.conv.OrganizationID})
	if err != nil {
		return 0, err
	}
	chain, turns, steps, sizes := past.Chain, past.Turns, past.Steps, past.Sizes
	live := make([]prompt.NumberedTurn, len(turns))
	for i, pt := range turns {
		past := prompt.Past{Turn: pt, Steps: steps[pt.ID], Sizes: sizes, CallsPerTurn: t.r.cfg.CallsPerTurn}
		live[i] = prompt.NumberedTurn{Number: pt.Number, Turn: pt,
			Messages: prompt.TurnMessages(t.person, past, len(turns)-i <= prompt.RecentTurns)}
	}
	if compact && len(steps[t.turnID]) == 0 {
		if chain, live, err = t.compact(ctx, chain, live); err != nil {
			return 0, err
		}
	}
	msgs := layout(chain, live, t.r.cfg.HistoryBudget)
	msgs = append(msgs, model.Message{Role: model.RoleUser,
		Text: prompt.UserMessage(t.person, t.turn.StartedAt, t.turn.TimeZone, t.turn.UserText)})
	own := steps[t.turnID]
	if len(own) > 0 {
		t.tail = &own[len(own)-1]
	}
	images, err := t.ownImages(ctx, own)
	if err != nil {
		return 0, err
	}
	for i, st := range own {
		for _, call := range st.Calls {
			t.nextPosition = max(t.nextPosition, call.Position+1)
		}
		if len(st.Calls) == 0 {
			continue
		}
		am := model.Message{Role: model.RoleAssistant, Text: st.Text}
		for _, call := range st.Calls {
			am.ToolCalls = append(am.ToolCalls, model.ToolCall{ID: prompt.CallID(call), Name: call.Name, Arguments: []byte(call.Arguments)})
		}
		msgs = append(msgs, am)
		if i == len(own)-1 && pending(st.Calls) {
			// The resumed run finishes this step and says each call in order.
			break
		}
		for _, call := range st.Calls {
			heard := ""
			if call.Heard != nil {
				heard = *call.Heard
			}
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: prompt.CallID(call), ToolName: call.Name, Text: heard,
				IsError: !call.Outcome.Succeeded(), Images: images[call.ID]})
			if call.Outcome == schematype.OutcomeHits {
				t.readDefinitions(call.Name, heard)
			}
		}
	}
	t.req.Messages = msgs
	return len(own), nil
}

// ownImages reads the images of this turn's own calls that gave non-text
// media, by call, for a model that takes images: a resumed turn shows the
// model what its first run showed. Earlier turns replay their words only.
func (t *turnRun) ownImages(ctx context.Context, own []prompt.Step) (map[int][]model.Image, error) {
	if !model.TakesImages(t.r.cfg.Provider, t.req.Model) {
		return nil, nil
	}
	byResult := map[int]int{}
	for _, st := range own {
		for _, c := range st.Calls {
			if c.ResultID != nil && c.Outcome == schematype.OutcomeHits && t.byName[c.Name].Media {
				byResult[*c.ResultID] = c.ID
			}
		}
	}
	if len(byResult) == 0 {
		return nil, nil
	}
	rows, err := t.r.store.Media(ctx, slices.Collect(maps.Keys(byResult)))
	if err != nil {
		return nil, err
	}
	out := make(map[int][]model.Image, len(rows))
	for _, r := range rows {
		_, images, _ := dispatch.Media(r.Content)
		out[byResult[r.ID]] = images
	}
	return out, nil
}
