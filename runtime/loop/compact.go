package loop

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/runtime/meter"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/store"
)

// layout is the history of earlier turns: the summaries, then the turns
// after them. When they still pass the budget (no summary could be
// written), the oldest turns are left out behind one line that says
// read_transcript has them; the last turn always stays.
func layout(chain []prompt.Summary, live []prompt.NumberedTurn, budget int) []model.Message {
	var msgs []model.Message
	for _, s := range chain {
		msgs = append(msgs, prompt.SummaryMessage(s))
	}
	n := prompt.Fit(prompt.Chars(msgs), sized(live), budget)
	if n > 0 {
		msgs = append(msgs, prompt.LeftOutTurns(live[0].Number, live[n-1].Number))
	}
	for _, l := range live[n:] {
		msgs = append(msgs, l.Messages...)
	}
	return msgs
}

func sized(live []prompt.NumberedTurn) []prompt.Sized {
	out := make([]prompt.Sized, len(live))
	for i, l := range live {
		out[i] = prompt.Sized{Number: l.Number, Chars: prompt.Chars(l.Messages)}
	}
	return out
}

// compact summarises the oldest live turns while the history passes its
// budget, at most prompt.MaxSummaryRounds summaries a turn, and returns
// the summaries and the turns left live. A summary that cannot be written
// (the provider failed, answered nothing, or another run wrote one for the
// same turns first) does not fail the turn: it goes on with the history it
// has, and layout leaves out what does not fit; the next turn tries again.
// Only a stop or a lost claim ends it.
func (t *turnRun) compact(ctx context.Context, chain []prompt.Summary, live []prompt.NumberedTurn) ([]prompt.Summary, []prompt.NumberedTurn, error) {
	budget := t.r.cfg.HistoryBudget
	for range prompt.MaxSummaryRounds {
		from, to, ok := prompt.Due(chain, sized(live), budget, 4*budget)
		if !ok {
			break
		}
		var folded []prompt.Summary
		if from == 1 {
			folded = chain
		}
		n := 0
		for n < len(live) && live[n].Number <= to {
			n++
		}
		s, err := t.summarise(ctx, prompt.SummaryRequest(t.person, from, to, folded, live[:n]), from, to)
		if err != nil {
			if errors.Is(err, errLeaseLost) || ctx.Err() != nil || t.modelCtx != nil && t.modelCtx.Err() != nil {
				return nil, nil, err
			}
			t.log.Warn("compaction: no summary this turn; the history is cut instead", "turns", prompt.Span(from, to), "err", err)
			break
		}
		if from == 1 {
			chain = nil
		}
		chain = append(chain, s)
		live = live[n:]
	}
	return chain, live, nil
}

// summarise asks the model for the summary of turns from–to and stores
// it, with its model call (kind SUMMARY, attributed to this turn), in one
// transaction.
func (t *turnRun) summarise(ctx context.Context, req model.Request, from, to int) (prompt.Summary, error) {
	req.Model, req.Attribution = t.req.Model, t.req.Attribution
	mctx := ctx
	if t.modelCtx != nil {
		mctx = t.modelCtx
	}
	start := t.r.cfg.Now()
	resp, err := t.r.cfg.Provider.Complete(mctx, req)
	elapsed := t.r.cfg.Now().Sub(start)
	name := req.Model
	if err == nil && resp.Model != "" {
		name = resp.Model
	}
	if name == "" {
		name = t.r.cfg.Provider.Name()
	}
	if err != nil {
		t.r.meter.ModelCall(name, true, meter.Tokens{})
		return prompt.Summary{}, fmt.Errorf("model provider: %w", err)
	}
	text := prompt.TrimSummary(resp.Text)
	if text == "" {
		return prompt.Summary{}, errors.New("the model answered with no summary")
	}
	cost, _ := t.r.cfg.Prices.Cost(name, resp.Usage)
	err = t.db.RecordSummary(ctx, store.Summary{ConversationID: t.conv.ID, From: from, To: to,
		Call: t.modelCall(&model.Response{Text: text, Usage: resp.Usage}, name, cost, elapsed, start,
			int64(token.Count(req.System)), req.Attribution.Key())})
	if err != nil {
		return prompt.Summary{}, err
	}
	t.r.meter.ModelCall(name, false, meter.Tokens{Input: resp.Usage.InputUncached, CacheRead: resp.Usage.CacheRead,
		CacheWrite: resp.Usage.CacheWrite, Output: resp.Usage.Output})
	return prompt.Summary{From: from, To: to, Text: text}, nil
}
