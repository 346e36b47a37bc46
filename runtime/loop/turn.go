package loop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/meter"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/store"
	"github.com/toolgate/toolgate/tools"
)

// turnRun is one run of a turn, from start or from where it stopped: the
// flow of the run (run, callModel, runTools in tools.go, pause). What it
// reads and writes goes through its store (db); the deck it offers is
// fixed in deck.go, the history assembled in history.go.
type turnRun struct {
	r      *Runner
	turnID int
	log    *slog.Logger
	// db is the run's handle on its turn in the store.
	db *store.Turn

	turn    *ent.Turn
	conv    *ent.Conversation
	agent   *ent.Agent
	person  prompt.Person
	offered []tools.Definition
	byName  map[string]tools.Definition
	apps    map[string]mcp.Application
	// appRows are the applications' rows, by name: their approval rules.
	appRows map[string]*ent.Application
	// notes are told the model ahead of a call's result, by call: how a
	// person changed its arguments.
	notes map[int]string
	req   model.Request
	// prefixTokens is the stable prefix (system prompt and definitions) in
	// o200k tokens: the same on every call of the turn.
	prefixTokens int
	// nextPosition is the position of the turn's next tool call.
	nextPosition int
	// modelCtx is cancelled when a drain starts: a model call in flight
	// is given up (it changes nothing), tool calls are let finish.
	modelCtx context.Context
	// tail is the turn's last recorded step, where a resumed run picks up.
	tail *prompt.Step
	// span is the run's root span; it records nothing when untraced.
	span trace.Span
	// finished: the final answer's step ended the turn in its own
	// transaction (callModel).
	finished bool
	// loaded is the turn as its claim loaded it (PostgreSQL), or nil.
	loaded *store.Loaded
	// limited: a monthly limit of the organisation or the user was set
	// when the run loaded the turn (store.Loaded).
	limited bool
	// userActiveAt is when the run's load read the turn's user active;
	// zero when deactivated.
	userActiveAt time.Time
	// deferred names the offered tools sent as stubs (offer.Build) whose
	// definitions the turn has not read yet (readDefinitions): calls to
	// them are refused.
	deferred map[string]bool
}

// newTurnRun is a run of turn turnID.
func (r *Runner) newTurnRun(turnID int, log *slog.Logger) *turnRun {
	return &turnRun{r: r, turnID: turnID, log: log, db: r.store.Turn(turnID)}
}

func (t *turnRun) run(ctx context.Context) error {
	if err := t.load(ctx); err != nil {
		return err
	}
	if t.turn.Status != turn.StatusRUNNING {
		return nil
	}
	if err := t.traceRun(ctx); err != nil {
		return err
	}
	if t.turn.AgentConfig == nil { // its agent is recorded on its first run
		t.r.meter.TurnStarted()
	}
	if t.turn.Replayed != (t.r.cfg.Provider.Name() == "replay") {
		if err := t.db.MarkReplayed(ctx, t.r.cfg.Provider.Name() == "replay"); err != nil {
			return err
		}
	}
	steps, err := t.history(ctx, true)
	if err != nil {
		return err
	}
	// Pick up where the last run stopped: a step recorded is never asked
	// of the model again.
	if tail := t.tail; tail != nil {
		switch {
		case len(tail.Calls) == 0:
			// The answer was recorded, the turn's end was not.
			t.finish(turn.StatusCOMPLETED, &tail.Text, "")
			return nil
		case pending(tail.Calls):
			paused, err := t.runTools(ctx, steps-1, tail.Calls, true)
			if err != nil || paused {
				return err
			}
		case t.unanswered(tail.Calls):
			// The question was recorded, the pause was not.
			return t.pause(ctx, tail.Calls)
		}
	}
	for step := steps; step < t.r.cfg.MaxSteps; step++ {
		if t.r.draining.Load() {
			return errStopped
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, rows, err := t.callModel(ctx, step)
		if err != nil {
			return err
		}
		if len(resp.ToolCalls) == 0 {
			if !t.finished {
				// Not ended with its answer (cancelled meanwhile): finish
				// says so, as for any other end.
				t.finish(turn.StatusCOMPLETED, &resp.Text, "")
			}
			return nil
		}
		t.req.Messages = append(t.req.Messages, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		paused, err := t.runTools(ctx, step, rows, false)
		if err != nil {
			return err
		}
		if paused {
			return nil
		}
		// The step is finished: a limit it crossed stops the turn here,
		// before another model call spends more. Without a limit when the
		// run loaded the turn, there is nothing to cross: a limit set
		// meanwhile holds from the next turn (sendMessage checks it).
		if b := t.r.cfg.Budget; b != nil && t.limited {
			stop, err := b(ctx, t.conv.OrganizationID, t.conv.UserID, t.r.cfg.Now())
			if err != nil {
				return fmt.Errorf("check budgets: %w", err)
			}
			if stop != "" {
				return shown(errors.New(stop))
			}
		}
	}
	return shown(fmt.Errorf("step limit reached: %d model calls without a final answer", t.r.cfg.MaxSteps))
}

// pending reports whether any of a step's calls was left unfinished.
func pending(calls []*ent.ToolCall) bool {
	return slices.ContainsFunc(calls, func(c *ent.ToolCall) bool { return c.Outcome == schematype.OutcomePending })
}

// unanswered reports whether the step asked the user a question that the
// turn has not recorded as asked and answered: the run stopped between
// recording the question and pausing.
func (t *turnRun) unanswered(calls []*ent.ToolCall) bool {
	i := t.pausing(calls)
	return i >= 0 && !tools.Answered(t.turn.Clarification, calls[i])
}

// pausing returns the index of the first call of a step that pauses the
// turn and succeeded, or -1.
func (t *turnRun) pausing(calls []*ent.ToolCall) int {
	return tools.Asking(calls, func(name string) bool { return t.byName[name].Pauses })
}

// callModel makes one model call and records it with the calls it asks
// for (store.Turn.RecordStep): a step is recorded whole or not at all.
func (t *turnRun) callModel(ctx context.Context, step int) (*model.Response, []*ent.ToolCall, error) {
	t.publish(events.Event{Kind: events.ModelCallStarted, Step: step, Status: string(turn.StatusRUNNING)})
	start := t.r.cfg.Now()
	mctx := ctx
	if t.modelCtx != nil {
		mctx = t.modelCtx
	}
	mctx, span := t.startModelCall(mctx, step)
	// Subscribers read the answer as the provider reads it; the stream
	// ends once the step is recorded, before its MODEL_CALL_FINISHED.
	stream := t.r.cfg.Events.Begin(t.turnID, step)
	defer stream.End()
	req := t.req
	req.Stream = stream
	resp, err := t.r.cfg.Provider.Complete(mctx, req)
	elapsed := t.r.cfg.Now().Sub(start)
	if err != nil {
		t.endModelCall(span, nil, "", 0, err)
		if mctx.Err() != nil {
			return nil, nil, mctx.Err()
		}
		t.r.meter.ModelCall(cmp.Or(t.req.Model, t.r.cfg.Provider.Name()), true, meter.Tokens{})
		return nil, nil, shown(fmt.Errorf("model provider: %w", err))
	}
	name := resp.Model
	if name == "" {
		name = t.req.Model
	}
	cost, _ := t.r.cfg.Prices.Cost(name, resp.Usage)
	t.endModelCall(span, resp, name, cost, nil)
	thinking := t.turn.Thinking
	if resp.Thinking != "" {
		th := resp.Thinking
		if thinking != nil {
			th = *thinking + "\n\n" + th
		}
		thinking = &th
	}
	rows, finished, err := t.db.RecordStep(ctx, store.Step{Number: step, ConversationID: t.turn.ConversationID,
		Call:     t.modelCall(resp, name, cost, elapsed, start, int64(t.prefixTokens), t.req.Attribution.Key()),
		Thinking: thinking, Thought: resp.Thinking != "", Calls: resp.ToolCalls, Position: t.nextPosition})
	t.finished = finished
	if err != nil {
		return nil, nil, err
	}
	t.r.meter.ModelCall(name, false, meter.Tokens{Input: resp.Usage.InputUncached, CacheRead: resp.Usage.CacheRead,
		CacheWrite: resp.Usage.CacheWrite, Output: resp.Usage.Output})
	t.turn.Thinking = thinking
	t.nextPosition += len(resp.ToolCalls)
	stream.End()
	t.publish(events.Event{Kind: events.ModelCallFinished, Step: step, Status: string(turn.StatusRUNNING)})
	if t.finished {
		t.ended(turn.StatusCOMPLETED, true)
	}
	return resp, rows, nil
}

// modelCall is a model call of the turn's as the store records it.
func (t *turnRun) modelCall(resp *model.Response, name string, cost schematype.Micros, elapsed time.Duration, start time.Time,
	prefix int64, attribution string) store.ModelCall {
	return store.ModelCall{OrganizationID: t.conv.OrganizationID, AgentID: t.conv.AgentID, UserID: t.conv.UserID,
		Text: resp.Text, Provider: t.r.cfg.Provider.Name(), Model: name, Usage: resp.Usage, Cost: cost,
		Duration: elapsed, StartedAt: start, PrefixTokens: prefix, Attribution: attribution}
}

// finish ends the turn, on a context of its own: a cancelled turn must
// still be recorded as cancelled, and a busy database is waited for.
func (t *turnRun) finish(status turn.Status, answer *string, reason string) {
	ctx := tenancy.System(context.Background())
	ended, touchErr, err := t.db.Finish(ctx, t.turn.ConversationID, status, answer, reason)
	if err != nil {
		t.log.Error("record turn end", "err", err)
		return
	}
	if !ended {
		return
	}
	if touchErr != nil {
		t.log.Warn("touch conversation", "err", touchErr)
	}
	t.ended(status, answer != nil)
}

// ended counts and announces the end of the turn, once it is stored.
func (t *turnRun) ended(status turn.Status, answered bool) {
	t.r.meter.TurnFinished(string(status), t.r.cfg.Now().Sub(t.turn.StartedAt))
	setTurnStatus(t.span, string(status))
	if answered {
		t.publish(events.Event{Kind: events.Answer, Status: string(status)})
	}
	t.publish(events.Event{Kind: events.Status, Status: string(status)})
}

// end records how a run ended, and reports whether the turn was left
// RUNNING for another run because this runner is stopping.
func (t *turnRun) end(ctx context.Context, err error) (stopped bool) {
	switch {
	case err == nil:
	case errors.Is(err, errLeaseLost) || errors.Is(context.Cause(ctx), errLeaseLost):
		t.log.Info("turn left to the runner that holds it, or cancelled")
	case errors.Is(err, errStopped) || errors.Is(context.Cause(ctx), errStopped) || t.r.draining.Load():
		t.log.Info("turn left running for resume", "reason", "shutdown")
		return true
	case ctx.Err() != nil:
		t.finish(turn.StatusCANCELLED, nil, "cancelled")
	default:
		t.log.Error("turn failed", "err", err)
		t.finish(turn.StatusFAILED, nil, reason(err))
	}
	return false
}

// shownError is an error whose words a user may read in Turn.error: the
// model provider's answer, the step limit. Anything else (a database's
// words among them) is logged, and the user reads that the turn failed.
type shownError struct{ error }

func (e shownError) Unwrap() error { return e.error }

func shown(err error) error { return shownError{err} }

// reason is what Turn.error says of a failure.
func reason(err error) string {
	var s shownError
	if errors.As(err, &s) {
		return s.Error()
	}
	return "the turn stopped on an internal error and could not go on; the details are in the server's log"
}

// publish announces e, which names the turn's status as of now.
func (t *turnRun) publish(e events.Event) {
	e.TurnID, e.At = t.turnID, t.r.cfg.Now()
	t.r.cfg.Events.Publish(e)
}

// pause stores the clarification the model asked for and leaves the turn
// waiting for the user's answer. The question is read from the step's
// pausing call's arguments as repaired and sent: the ones the tool itself
// accepted.
func (t *turnRun) pause(ctx context.Context, rows []*ent.ToolCall) error {
	i := t.pausing(rows)
	if i < 0 {
		return nil
	}
	cl, err := tools.Question(rows[i])
	if err != nil {
		return fmt.Errorf("read clarification: %w", err)
	}
	paused, err := t.db.Pause(ctx, turn.StatusWAITING_FOR_CLARIFICATION, &cl)
	if err != nil {
		return fmt.Errorf("pause for clarification: %w", err)
	}
	if paused {
		setTurnStatus(t.span, string(turn.StatusWAITING_FOR_CLARIFICATION))
		t.publish(events.Event{Kind: events.Status, Step: rows[i].Step, Status: string(turn.StatusWAITING_FOR_CLARIFICATION)})
	}
	return nil
}
