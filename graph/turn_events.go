package graph

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/tools/interact"
	"github.com/toolgate/toolgate/tools/registry"
)

// publishAfterCommit publishes e once the mutation's transaction has
// committed: a subscriber that hears it reads what it announces.
func (r *Resolver) publishAfterCommit(ctx context.Context, e events.Event) {
	if r.Runner == nil {
		return
	}
	bus := r.Runner.Events()
	tx := ent.TxFromContext(ctx)
	if tx == nil {
		bus.Publish(e)
		return
	}
	tx.OnCommit(func(next ent.Committer) ent.Committer {
		return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
			if err := next.Commit(ctx, tx); err != nil {
				return err
			}
			bus.Publish(e)
			return nil
		})
	})
}

// turnEvents streams a turn's events, each with the turn as of that event.
// It listens before it reads, so an event is either in what it read or
// heard afterwards; what it read is never heard twice (keys). Without
// replay the current status comes first; with it, the turn's earlier
// events, rebuilt from what is stored. The stream ends when the turn
// does, or when the client goes.
func (r *Resolver) turnEvents(ctx context.Context, turnID int, replay bool) (<-chan *model.TurnEvent, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	if r.Runner == nil {
		return nil, fmt.Errorf("no runtime")
	}
	needs := eventNeedsOf(ctx)
	sub := r.Runner.Events().Subscribe(turnID)
	t, err := r.Client.Turn.Get(ctx, turnID)
	if err != nil {
		sub.Close()
		return nil, err
	}
	past, err := r.pastEvents(ctx, t)
	if err != nil {
		sub.Close()
		return nil, err
	}
	seen := make(map[string]bool, len(past))
	for _, p := range past {
		seen[p.key] = true
	}
	first := past
	if !replay {
		first = []pastEvent{{ev: &model.TurnEvent{Kind: events.Status, Turn: t, At: time.Now()}}}
	}
	out := make(chan *model.TurnEvent, 1)
	go func() {
		defer close(out)
		defer sub.Close()
		send := func(ev *model.TurnEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for _, p := range first {
			if !send(p.ev) {
				return
			}
		}
		if ended(t.Status) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-sub.C:
				if !ok {
					return
				}
				k := eventKey(e.Kind, e.Step, e.ToolCallID, e.Status)
				if seen[k] {
					continue
				}
				seen[k] = true
				// A model call that started before the subscription and
				// had not been stored: its start comes with its end.
				if started := eventKey(events.ModelCallStarted, e.Step, 0, ""); e.Kind == events.ModelCallFinished && !seen[started] {
					seen[started] = true
					ev, err := r.modelCallStarted(ctx, e, needs)
					if err != nil {
						r.Log.WarnContext(ctx, "turn event", "turn", EncodeID(turnID), "err", err)
						return
					}
					if !send(ev) {
						return
					}
				}
				ev, err := r.turnEvent(ctx, e, needs)
				if err != nil {
					r.Log.WarnContext(ctx, "turn event", "turn", EncodeID(turnID), "err", err)
					return
				}
				if !send(ev) || (e.Kind == events.Status && ended(ev.Turn.Status)) {
					return
				}
			}
		}
	}()
	return out, nil
}

func ended(s turn.Status) bool {
	return s == turn.StatusCOMPLETED || s == turn.StatusFAILED || s == turn.StatusCANCELLED
}

// eventKey names an event once per turn: a subscriber's replay and the
// events it hears live are told apart by it.
func eventKey(kind events.Kind, step, toolCallID int, status string) string {
	switch kind {
	case events.ModelCallStarted, events.ModelCallFinished:
		return string(kind) + ":" + strconv.Itoa(step)
	case events.ToolCallStarted, events.ToolCallFinished:
		return string(kind) + ":" + strconv.Itoa(toolCallID)
	case events.Status:
		if ended(turn.Status(status)) {
			return string(kind) + ":" + status
		}
		return string(kind) + ":" + status + ":" + strconv.Itoa(step)
	}
	return string(kind)
}

// eventNeeds says which rows a subscription's selection needs read for
// each event: a selection of the turn's id and status (and of the event's
// kind and time) is answered from the event itself.
type eventNeeds struct {
	turn, toolCall bool
}

// eventNeedsOf reads the subscription's selection; without one (a caller
// outside a GraphQL operation) it reads everything.
func eventNeedsOf(ctx context.Context) eventNeeds {
	if !graphql.HasOperationContext(ctx) {
		return eventNeeds{turn: true, toolCall: true}
	}
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return eventNeeds{turn: true, toolCall: true}
	}
	oc := graphql.GetOperationContext(ctx)
	var n eventNeeds
	for _, f := range graphql.CollectFields(oc, fc.Field.Selections, []string{"TurnEvent"}) {
		switch f.Name {
		case "turn":
			n.turn = n.turn || beyond(oc, f, "Turn", "id", "status")
		case "toolCall":
			n.toolCall = n.toolCall || beyond(oc, f, "ToolCall", "id")
		}
	}
	return n
}

// beyond reports whether f selects a field of typ other than those named
// (and __typename).
func beyond(oc *graphql.OperationContext, f graphql.CollectedField, typ string, known ...string) bool {
	for _, g := range graphql.CollectFields(oc, f.Selections, []string{typ}) {
		if g.Name != "__typename" && !slices.Contains(known, g.Name) {
			return true
		}
	}
	return false
}

// eventTurn is the turn as of e: read once for all the event's
// subscribers when the selection needs more than the event carries.
func (r *Resolver) eventTurn(ctx context.Context, e events.Event, needs eventNeeds) (*ent.Turn, error) {
	if !needs.turn {
		return &ent.Turn{ID: e.TurnID, Status: turn.Status(e.Status)}, nil
	}
	v, err := r.reads.do(ctx, readKey{event: eventID(e), what: "turn"}, func(ctx context.Context) (any, error) {
		return r.Client.Turn.Get(ctx, e.TurnID)
	})
	if err != nil {
		return nil, err
	}
	return v.(*ent.Turn), nil
}

// turnEvent is a live event with the turn and tool call as of the event.
func (r *Resolver) turnEvent(ctx context.Context, e events.Event, needs eventNeeds) (*model.TurnEvent, error) {
	t, err := r.eventTurn(ctx, e, needs)
	if err != nil {
		return nil, err
	}
	ev := &model.TurnEvent{Kind: e.Kind, Turn: turnAsOf(t, e.Status), At: e.At}
	if e.ToolCallID != 0 {
		if !needs.toolCall {
			ev.ToolCall = &ent.ToolCall{ID: e.ToolCallID, TurnID: e.TurnID, Step: e.Step}
			return ev, nil
		}
		v, err := r.reads.do(ctx, readKey{event: eventID(e), what: "toolCall"}, func(ctx context.Context) (any, error) {
			return r.Client.ToolCall.Get(ctx, e.ToolCallID)
		})
		if err != nil {
			return nil, err
		}
		c := v.(*ent.ToolCall)
		ev.ToolCall = c
		if e.Kind == events.ToolCallStarted {
			ev.ToolCall = callStarted(c)
		}
	}
	return ev, nil
}

// modelCallStarted is the start of the model call a MODEL_CALL_FINISHED
// event ends, at the time stored with it.
func (r *Resolver) modelCallStarted(ctx context.Context, e events.Event, needs eventNeeds) (*model.TurnEvent, error) {
	t, err := r.eventTurn(ctx, e, needs)
	if err != nil {
		return nil, err
	}
	v, err := r.reads.do(ctx, readKey{event: eventID(e), what: "modelCall"}, func(ctx context.Context) (any, error) {
		mc, err := r.Client.ModelCall.Query().
			Where(modelcall.TurnID(e.TurnID), modelcall.KindEQ(modelcall.KindSTEP), modelcall.Step(e.Step)).
			Select(modelcall.FieldStartedAt).
			Only(ctx)
		switch {
		case err == nil:
			return mc.StartedAt, nil
		case ent.IsNotFound(err):
			return e.At, nil
		}
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return &model.TurnEvent{Kind: events.ModelCallStarted, Turn: turnAsOf(t, string(turn.StatusRUNNING)), At: v.(time.Time)}, nil
}

// eventKeyID names one published event: what its subscribers read of it is
// shared under it.
type eventKeyID struct {
	turnID, toolCallID, step int
	kind                     events.Kind
	status                   string
	at                       int64
}

func eventID(e events.Event) eventKeyID {
	return eventKeyID{turnID: e.TurnID, toolCallID: e.ToolCallID, step: e.Step, kind: e.Kind, status: e.Status, at: e.At.UnixNano()}
}

type readKey struct {
	event eventKeyID
	what  string
}

// maxShared is how many reads eventReads keeps: the events of the last
// moments, whose subscribers may still be reading them.
const maxShared = 1024

// eventReads reads each row an event's subscribers need once, for all of
// them: the first reads, the others wait for it and share what it read
// (every subscriber was allowed the turn when it subscribed). The read
// runs without the first subscriber's cancellation, so a client that goes
// fails no other.
type eventReads struct {
	mu    sync.Mutex
	reads map[readKey]*sharedRead
	order []readKey
}

type sharedRead struct {
	done chan struct{}
	v    any
	err  error
}

// do returns what read returns for key, reading it at most once while the
// key is kept.
func (s *eventReads) do(ctx context.Context, key readKey, read func(ctx context.Context) (any, error)) (any, error) {
	s.mu.Lock()
	if s.reads == nil {
		s.reads = map[readKey]*sharedRead{}
	}
	if sr, ok := s.reads[key]; ok {
		s.mu.Unlock()
		select {
		case <-sr.done:
			return sr.v, sr.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	sr := &sharedRead{done: make(chan struct{})}
	s.reads[key] = sr
	s.order = append(s.order, key)
	if len(s.order) > maxShared {
		delete(s.reads, s.order[0])
		s.order = s.order[1:]
	}
	s.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	sr.v, sr.err = read(rctx)
	if sr.err != nil {
		// Not kept: the next subscriber tries for itself.
		s.mu.Lock()
		if s.reads[key] == sr {
			delete(s.reads, key)
		}
		s.mu.Unlock()
	}
	close(sr.done)
	return sr.v, sr.err
}

// turnAsOf is t as an event with the given status announced it: a turn
// still running has no answer, error or end yet, whatever it has now.
func turnAsOf(t *ent.Turn, status string) *ent.Turn {
	if status == "" || string(t.Status) == status {
		return t
	}
	cp := *t
	cp.Status = turn.Status(status)
	if !ended(cp.Status) {
		cp.Answer, cp.Error, cp.FinishedAt = nil, nil, nil
	}
	return &cp
}

// callStarted is a tool call as it stood when it started: pending, with
// nothing of its result.
func callStarted(c *ent.ToolCall) *ent.ToolCall {
	cp := *c
	cp.Outcome = toolcall.OutcomePENDING
	cp.Attempts = 0
	cp.Failures, cp.Evidence, cp.Repairs = []schematype.ItemFailure{}, []schematype.Span{}, []schematype.Repair{}
	cp.Message, cp.Heard, cp.Ref, cp.Guardrail, cp.ArgumentsRef = nil, nil, nil, nil, nil
	cp.ResultID, cp.FinishedAt = nil, nil
	return &cp
}

// pastEvent is an event rebuilt from what is stored, with its key.
type pastEvent struct {
	key string
	ev  *model.TurnEvent
}

// pastEvents rebuilds a turn's events so far from what is stored: its
// start, each step's model call and tool calls, each pause for a question
// and its answer, and its end. A model call in flight is not stored yet:
// its start is told with its end.
func (r *Resolver) pastEvents(ctx context.Context, t *ent.Turn) ([]pastEvent, error) {
	// Tool calls first: a step's model call and its tool calls are stored
	// in one transaction, so every tool call read here has its model call
	// in the next read (read the other way round, a step stored in
	// between would show its tool calls without their model call, and the
	// model call would then be heard live after them).
	calls, err := r.Client.ToolCall.Query().Where(toolcall.TurnID(t.ID)).
		Order(ent.Asc(toolcall.FieldPosition)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load tool calls: %w", err)
	}
	mcs, err := r.Client.ModelCall.Query().
		Where(modelcall.TurnID(t.ID), modelcall.KindEQ(modelcall.KindSTEP)).
		Order(ent.Asc(modelcall.FieldStep)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load model calls: %w", err)
	}
	var out []pastEvent
	add := func(kind events.Kind, step int, c *ent.ToolCall, status turn.Status, at time.Time) {
		ev := &model.TurnEvent{Kind: kind, Turn: turnAsOf(t, string(status)), At: at}
		id := 0
		if c != nil {
			id, ev.ToolCall = c.ID, c
			if kind == events.ToolCallStarted {
				ev.ToolCall = callStarted(c)
			}
		}
		out = append(out, pastEvent{key: eventKey(kind, step, id, string(status)), ev: ev})
	}
	add(events.Status, -1, nil, turn.StatusRUNNING, t.StartedAt)
	// A key of its own: the start is never published, so never heard.
	out[0].key = "STATUS:start"

	steps := 0
	for _, mc := range mcs {
		steps = max(steps, mc.Step+1)
	}
	for _, c := range calls {
		steps = max(steps, c.Step+1)
	}
	later := func(step int) bool {
		return slices.ContainsFunc(mcs, func(mc *ent.ModelCall) bool { return mc.Step > step })
	}
	pausing := registry.Pausing()
	status := turn.StatusRUNNING
	for step := range steps {
		if i := slices.IndexFunc(mcs, func(mc *ent.ModelCall) bool { return mc.Step == step }); i >= 0 {
			mc := mcs[i]
			add(events.ModelCallStarted, step, nil, turn.StatusRUNNING, mc.StartedAt)
			add(events.ModelCallFinished, step, nil, turn.StatusRUNNING, mc.StartedAt.Add(time.Duration(mc.DurationMs)*time.Millisecond))
		}
		var pause *ent.ToolCall
		for _, c := range calls {
			if c.Step != step {
				continue
			}
			add(events.ToolCallStarted, step, c, turn.StatusRUNNING, c.StartedAt)
			if c.Outcome == toolcall.OutcomePENDING || c.FinishedAt == nil {
				continue
			}
			add(events.ToolCallFinished, step, c, turn.StatusRUNNING, *c.FinishedAt)
			if pause == nil && slices.Contains(pausing, c.Name) &&
				(c.Outcome == toolcall.OutcomeHITS || c.Outcome == toolcall.OutcomeABSENCE) {
				pause = c
			}
		}
		if pause == nil {
			continue
		}
		// A pause is told once it is stored: the turn waits now, or went on.
		answered := t.Status == turn.StatusRUNNING && answers(t, pause)
		if t.Status == turn.StatusWAITING_FOR_CLARIFICATION || later(step) || ended(t.Status) || answered {
			add(events.Status, step, nil, turn.StatusWAITING_FOR_CLARIFICATION, *pause.FinishedAt)
			status = turn.StatusWAITING_FOR_CLARIFICATION
		}
		if later(step) || answered {
			at := *pause.FinishedAt
			if i := slices.IndexFunc(mcs, func(mc *ent.ModelCall) bool { return mc.Step > step }); i >= 0 {
				at = mcs[i].StartedAt
			} else if t.HeartbeatAt != nil {
				at = *t.HeartbeatAt
			}
			add(events.Status, step, nil, turn.StatusRUNNING, at)
			status = turn.StatusRUNNING
		}
	}
	if ended(t.Status) {
		at := t.StartedAt
		if t.FinishedAt != nil {
			at = *t.FinishedAt
		}
		if t.Answer != nil {
			add(events.Answer, 0, nil, t.Status, at)
		}
		add(events.Status, 0, nil, t.Status, at)
	} else if status != t.Status {
		add(events.Status, steps, nil, t.Status, time.Now())
	}
	return out, nil
}

// answers reports whether the turn's clarification is the question of
// call, answered.
func answers(t *ent.Turn, call *ent.ToolCall) bool {
	cl := t.Clarification
	if cl == nil || cl.Answer == nil {
		return false
	}
	c, err := interact.ParseClarify([]byte(call.Arguments))
	return err == nil && c.Question == cl.Question
}
