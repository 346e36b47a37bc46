package graph

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/runtime/events"
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

// followOptions are a subscription's arguments past the turn.
type followOptions struct {
	replay, deltas bool
	after          *string
}

// turnEvents streams a turn's events, each with the turn as of that event.
// It listens before it reads, so an event is either in what it read or
// heard afterwards; where each event falls in the turn (position) tells
// what was told, so nothing is told twice. Without replay the current
// status comes first; with it, the turn's earlier events, rebuilt from
// what is stored; with after, those that came after it. The stream ends
// when the turn does, or when the client goes.
func (r *Resolver) turnEvents(ctx context.Context, turnID int, o followOptions) (<-chan *model.TurnEvent, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	if r.Runner == nil {
		return nil, fmt.Errorf("no runtime")
	}
	at := startPosition()
	if o.after != nil {
		p, err := parseSeq(*o.after)
		if err != nil {
			return nil, err
		}
		at = p
	}
	bus := r.Runner.Events()
	sub := bus.Subscribe(turnID)
	t, err := r.Client.Turn.Get(ctx, turnID)
	if err != nil {
		sub.Close()
		return nil, err
	}
	past, err := r.pastEvents(ctx, t, o.deltas)
	if err != nil {
		sub.Close()
		return nil, err
	}
	out := make(chan *model.TurnEvent, 1)
	f := &follower{r: r, ctx: ctx, turnID: turnID, needs: eventNeedsOf(ctx), deltas: o.deltas, at: at, last: t, out: out, bus: bus}
	go func() {
		defer close(out)
		defer sub.Close()
		f.follow(sub, t, past, o.replay || o.after != nil)
	}()
	return out, nil
}

// follower tells one subscriber a turn's events.
type follower struct {
	r      *Resolver
	ctx    context.Context
	turnID int
	needs  eventNeeds
	deltas bool
	at     position
	// last is the turn as the latest event read it: text events carry it.
	last *ent.Turn
	out  chan<- *model.TurnEvent
	bus  *events.Bus
}

// SlowSubscriber is how long a subscription may leave an event unread
// before it is closed: it holds nothing of the turn's pace, and nothing of
// its memory once closed.
var SlowSubscriber = 30 * time.Second

// errTooSlow ends a subscription that fell so far behind that events were
// lost for it; its client resumes with after.
func errTooSlow(seq string) error {
	e := gqlerror.Errorf("this subscription fell too far behind and was closed: subscribe again with after: the seq of the last event read")
	e.Extensions = map[string]any{"code": "TOO_SLOW", "after": seq}
	return e
}

func (f *follower) follow(sub *events.Subscription, t *ent.Turn, past []pastEvent, replay bool) {
	for _, p := range past {
		if !replay {
			// Told as where the turn stands, not event by event.
			if p.text == nil && !f.at.covers(p.ev.Kind, p.step, p.phase, p.toolCallID) {
				f.at.advance(p.ev.Kind, p.step, p.phase, p.toolCallID)
			}
			continue
		}
		if !f.tellPast(p) {
			return
		}
	}
	if !replay {
		if !f.send(&model.TurnEvent{Kind: events.Status, Of: t, At: f.r.now()}) {
			return
		}
	}
	if events.Ended(t.Status) {
		return
	}
	if f.deltas && !f.catchUp(true) {
		return
	}
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-sub.Text:
			if !f.catchUp(false) {
				return
			}
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			if sub.Dropped() > 0 {
				f.send(&model.TurnEvent{Err: errTooSlow(f.at.seq())})
				return
			}
			if done, ok := f.live(*e); !ok || done {
				return
			}
		}
	}
}

// send tells ev at the subscriber's position, unless the subscriber goes or
// leaves it unread for SlowSubscriber.
func (f *follower) send(ev *model.TurnEvent) bool {
	ev.Seq, ev.Step = f.at.seq(), f.at.step
	timer := time.NewTimer(SlowSubscriber)
	defer timer.Stop()
	select {
	case f.out <- ev:
		return true
	case <-f.ctx.Done():
	case <-timer.C:
		f.r.Log.InfoContext(f.ctx, "turn events: subscriber left an event unread; closed", "turn", EncodeID(f.turnID), "after", SlowSubscriber)
	}
	return false
}

// tell tells a durable event at its place, unless it was told.
func (f *follower) tell(ev *model.TurnEvent, kind events.Kind, step, phase, toolCallID int) bool {
	if phase >= events.PhaseAnswer {
		step = f.at.step
	}
	if f.at.covers(kind, step, phase, toolCallID) {
		return true
	}
	f.at.advance(kind, step, phase, toolCallID)
	return f.send(ev)
}

// tellPast tells one rebuilt event, unless it was told.
func (f *follower) tellPast(p pastEvent) bool {
	if p.text != nil {
		return f.stored(p.step, *p.text, p.calls)
	}
	return f.tell(p.ev, p.ev.Kind, p.step, p.phase, p.toolCallID)
}

// live tells an event heard from the runtime; done when the turn ended.
func (f *follower) live(e events.Event) (done, ok bool) {
	step, phase := events.PlaceEvent(e)
	if phase >= events.PhaseAnswer {
		step = f.at.step
	}
	if f.at.covers(e.Kind, step, phase, e.ToolCallID) {
		return false, true
	}
	// The text so far first: the event comes after it.
	if f.deltas && !f.catchUp(false) {
		return false, false
	}
	if e.Kind == events.ModelCallFinished {
		// A model call that started before the subscription and had not
		// been stored: its start comes with its end.
		if !f.at.covers(events.ModelCallStarted, e.Step, events.PhaseModel, 0) {
			ev, err := f.r.modelCallStarted(f.ctx, e, f.needs)
			if err != nil {
				f.r.Log.WarnContext(f.ctx, "turn event", "turn", EncodeID(f.turnID), "err", err)
				return false, false
			}
			if !f.tell(ev, events.ModelCallStarted, e.Step, events.PhaseModel, 0) {
				return false, false
			}
		}
		if f.deltas && !f.finishText(e.Step) {
			return false, false
		}
	}
	ev, err := f.r.turnEvent(f.ctx, e, f.needs)
	if err != nil {
		f.r.Log.WarnContext(f.ctx, "turn event", "turn", EncodeID(f.turnID), "err", err)
		return false, false
	}
	f.last = ev.Of
	if !f.tell(ev, e.Kind, step, phase, e.ToolCallID) {
		return false, false
	}
	if e.Kind == events.Status && events.Ended(ev.Of.Status) {
		return true, true
	}
	if e.Kind == events.ModelCallStarted && f.deltas && !f.catchUp(false) {
		return false, false
	}
	return false, true
}

// running is the turn as text events carry it.
func (f *follower) running() *ent.Turn {
	return turnAsOf(f.last, string(turn.StatusRUNNING))
}

// catchUp tells what the turn's model call in flight wrote since the
// subscriber was last told. The first catch-up of a subscription tells
// the start of a call it joined during; later ones wait for the call's
// MODEL_CALL_STARTED.
func (f *follower) catchUp(first bool) bool {
	if !f.deltas {
		return true
	}
	tx, ok := f.bus.Text(f.turnID, f.at.bytes)
	if ok && tx.Attempt != f.at.attempt && tx.From != 0 {
		tx, ok = f.bus.Text(f.turnID, 0)
	}
	if !ok || !tx.Synced {
		if first || ok {
			// Another replica may be streaming it: it sends it whole.
			f.bus.Ask(f.turnID)
		}
		return true
	}
	if tx.Step < f.at.step || tx.Step == f.at.step && f.at.phase > events.PhaseText {
		return true
	}
	if tx.Step > f.at.step || f.at.phase < events.PhaseModel {
		if !first || tx.Done {
			return true
		}
		ev := &model.TurnEvent{Kind: events.ModelCallStarted, Of: f.running(), At: tx.At}
		if !f.tell(ev, events.ModelCallStarted, tx.Step, events.PhaseModel, 0) {
			return false
		}
	}
	return f.apply(tx)
}

// apply tells the subscriber, at the step's text phase, what tx holds
// past what it was told: the rest of its text when it holds the start of
// the same attempt, else (a new try of the call) the whole text from
// offset 0; then the tool calls being written.
func (f *follower) apply(tx events.Text) bool {
	p := &f.at
	if p.phase < events.PhaseText {
		p.advance(events.TextDelta, tx.Step, events.PhaseText, 0)
	}
	if tx.Attempt != p.attempt {
		if p.chars == 0 && p.calls == 0 {
			p.attempt = tx.Attempt
		} else {
			p.restart(tx.Attempt)
			if !f.sendText(tx.Tail, 0) {
				return false
			}
			return f.writings(tx.Calls)
		}
	}
	if tx.From != p.bytes {
		// The replica holds less than the subscriber was told (it lags
		// another that told it): the rest comes as it catches up.
		return true
	}
	if tx.Tail != "" && !f.sendText(tx.Tail, p.chars) {
		return false
	}
	return f.writings(tx.Calls)
}

// sendText tells text at offset (the end of what the subscriber holds, or
// 0 after a restart).
func (f *follower) sendText(text string, offset int) bool {
	f.at.told(text)
	return f.send(&model.TurnEvent{Kind: events.TextDelta, Of: f.running(), At: f.r.now(),
		Delta: &model.TextDelta{Text: text, Offset: offset}})
}

// writings tells the tool calls being written that are new, or whose
// arguments grew.
func (f *follower) writings(calls []events.Writing) bool {
	p := &f.at
	for _, w := range calls {
		switch {
		case w.Index < p.calls-1:
			continue
		case w.Index == p.calls-1:
			if w.Chars <= p.args {
				continue
			}
			p.pos += w.Chars - p.args
		default:
			p.pos += 1 + w.Chars
			p.calls = w.Index + 1
		}
		p.args = w.Chars
		w := w
		if !f.send(&model.TurnEvent{Kind: events.ToolCallWriting, Of: f.running(), At: f.r.now(), Writing: &w}) {
			return false
		}
	}
	return true
}

// finishText tells the rest of step's text, and the tool calls its model
// wrote, before its MODEL_CALL_FINISHED: from the stream when this
// replica holds it whole, else from what is stored.
func (f *follower) finishText(step int) bool {
	if f.at.step != step || f.at.phase > events.PhaseText {
		return true
	}
	tx, ok := f.bus.Text(f.turnID, f.at.bytes)
	if ok && tx.Attempt != f.at.attempt && tx.From != 0 {
		tx, ok = f.bus.Text(f.turnID, 0)
	}
	if ok && tx.Step == step && tx.Synced && tx.Done && (tx.Attempt != f.at.attempt || tx.From == f.at.bytes) {
		// Another try than the one told (or none told yet) is told from
		// its start.
		return f.apply(tx)
	}
	v, err := f.r.reads.do(f.ctx, readKey{event: eventKeyID{turnID: f.turnID, step: step, kind: events.TextDelta}, what: "text"},
		func(ctx context.Context) (any, error) {
			mc, err := f.r.Client.ModelCall.Query().
				Where(modelcall.TurnID(f.turnID), modelcall.KindEQ(modelcall.KindSTEP), modelcall.Step(step)).
				Select(modelcall.FieldText).Only(ctx)
			if err != nil {
				return nil, err
			}
			calls, err := f.r.Client.ToolCall.Query().
				Where(toolcall.TurnID(f.turnID), toolcall.Step(step)).
				Order(ent.Asc(toolcall.FieldPosition)).Select(toolcall.FieldStep, toolcall.FieldName).All(ctx)
			if err != nil {
				return nil, err
			}
			return storedStep{text: mc.Text, calls: events.WritingsOf(calls, step)}, nil
		})
	if err != nil {
		f.r.Log.WarnContext(f.ctx, "turn event", "turn", EncodeID(f.turnID), "err", err)
		return false
	}
	st := v.(storedStep)
	return f.stored(step, st.text, st.calls)
}

// storedStep is a step's model call as stored: its text and the tool
// calls it asked for.
type storedStep struct {
	text  string
	calls []events.Writing
}

// stored tells step's text as it is recorded (the rest of it when the
// subscriber holds its start, else all of it from offset 0), then the
// tool calls it wrote that were not told.
func (f *follower) stored(step int, text string, calls []events.Writing) bool {
	p := &f.at
	if !f.deltas || p.step > step || p.step == step && p.phase > events.PhaseText {
		return true
	}
	if p.step < step || p.phase < events.PhaseModel {
		// Its start was told with the rebuilt events before it.
		return true
	}
	if p.phase < events.PhaseText {
		p.advance(events.TextDelta, step, events.PhaseText, 0)
	}
	switch {
	case p.chars == 0 && p.calls == 0:
		p.attempt = "="
		if text != "" && !f.sendText(text, 0) {
			return false
		}
	case p.holds(text) && utf8.RuneStart(byteAt(text, p.bytes)):
		p.attempt = "="
		if rest := text[p.bytes:]; rest != "" && !f.sendText(rest, p.chars) {
			return false
		}
	default:
		p.restart("=")
		if !f.sendText(text, 0) {
			return false
		}
	}
	return f.writings(calls)
}

// byteAt is s[i], or a character's start past its end.
func byteAt(s string, i int) byte {
	if i >= len(s) {
		return 'a'
	}
	return s[i]
}

// eventNeeds says which rows a subscription's selection needs read for
// each event: a selection of the turn's id and status (and of the event's
// kind and time) is answered from the event itself.
type eventNeeds struct {
	turn, toolCall bool
	// turnLive: the selection asks the turn for more than an event of a
	// turn still running knows (its id and status; its answer, error and
	// finish time are none until it ends): without it, only the event that
	// ends the turn reads it.
	turnLive bool
}

// eventNeedsOf reads the subscription's selection; without one (a caller
// outside a GraphQL operation) it reads everything.
func eventNeedsOf(ctx context.Context) eventNeeds {
	if !graphql.HasOperationContext(ctx) {
		return eventNeeds{turn: true, toolCall: true, turnLive: true}
	}
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return eventNeeds{turn: true, toolCall: true, turnLive: true}
	}
	oc := graphql.GetOperationContext(ctx)
	var n eventNeeds
	for _, f := range graphql.CollectFields(oc, fc.Field.Selections, []string{"TurnEvent"}) {
		switch f.Name {
		case "turn":
			n.turn = n.turn || beyond(oc, f, "Turn", "id", "status")
			n.turnLive = n.turnLive || beyond(oc, f, "Turn", "id", "status", "answer", "error", "finishedAt")
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
	if !needs.turn || (!needs.turnLive && e.Status != "" && !events.Ended(turn.Status(e.Status))) {
		return &ent.Turn{ID: e.TurnID, Status: turn.Status(e.Status)}, nil
	}
	key := readKey{event: eventID(e), what: "turn"}
	if events.Ended(turn.Status(e.Status)) {
		// The events that end a turn (its answer, its status) are
		// announced once the end is stored, which is the turn's last
		// change: they share one read.
		key = readKey{event: eventKeyID{turnID: e.TurnID, status: e.Status}, what: "ended turn"}
	}
	v, err := r.reads.do(ctx, key, func(ctx context.Context) (any, error) {
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
	ev := &model.TurnEvent{Kind: e.Kind, Of: turnAsOf(t, e.Status), At: e.At}
	if e.ToolCallID != 0 && e.Kind != events.Status {
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
	return &model.TurnEvent{Kind: events.ModelCallStarted, Of: turnAsOf(t, string(turn.StatusRUNNING)), At: v.(time.Time)}, nil
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
	if !events.Ended(cp.Status) {
		cp.Answer, cp.Error, cp.FinishedAt = nil, nil, nil
	}
	return &cp
}

// callStarted is a tool call as it stood when it started: pending, with
// nothing of its result.
func callStarted(c *ent.ToolCall) *ent.ToolCall {
	cp := *c
	cp.Outcome = schematype.OutcomePending
	cp.Attempts = 0
	cp.Failures, cp.Evidence, cp.Repairs = []schematype.ItemFailure{}, []schematype.Span{}, []schematype.Repair{}
	cp.Message, cp.Heard, cp.Ref, cp.Guardrail, cp.ArgumentsRef = nil, nil, nil, nil, nil
	cp.ResultID, cp.FinishedAt = nil, nil
	return &cp
}

// pastEvent is an event rebuilt from what is stored, with where it falls;
// or, with text set (and ev nil), a step's text as recorded.
type pastEvent struct {
	ev                      *model.TurnEvent
	step, phase, toolCallID int
	text                    *string
	// calls are the tool calls the step's model wrote, told after its
	// text as they were told live.
	calls []events.Writing
}

// pastEvents rebuilds a turn's events so far from what is stored
// (events.Replay), as the API tells them.
func (r *Resolver) pastEvents(ctx context.Context, t *ent.Turn, deltas bool) ([]pastEvent, error) {
	pausing := registry.Pausing()
	past, err := events.Replay(ctx, r.Client, t, deltas, func(name string) bool { return slices.Contains(pausing, name) }, r.now())
	if err != nil {
		return nil, err
	}
	out := make([]pastEvent, len(past))
	for i, p := range past {
		out[i] = pastEvent{step: p.Step, phase: p.Phase, toolCallID: p.ToolCallID, text: p.Text, calls: p.Calls}
		if p.Text != nil {
			continue
		}
		ev := &model.TurnEvent{Kind: p.Kind, Of: turnAsOf(t, string(p.Status)), At: p.At}
		switch {
		case p.Call == nil || p.Kind == events.Status:
		case p.Kind == events.ToolCallStarted:
			ev.ToolCall = callStarted(p.Call)
		default:
			ev.ToolCall = p.Call
		}
		out[i].ev = ev
	}
	return out, nil
}
