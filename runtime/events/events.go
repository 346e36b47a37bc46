// Package events fans a turn's events out to its subscribers in this
// process. Publishers never block: a subscriber that falls behind loses
// events rather than stalling the turn, and learns it from Dropped.
package events

import (
	"sync"
	"sync/atomic"
	"time"
)

// Kind is what happened.
type Kind string

// The kinds of turn events.
const (
	ModelCallStarted  Kind = "MODEL_CALL_STARTED"
	ModelCallFinished Kind = "MODEL_CALL_FINISHED"
	ToolCallStarted   Kind = "TOOL_CALL_STARTED"
	ToolCallFinished  Kind = "TOOL_CALL_FINISHED"
	Answer            Kind = "ANSWER"
	Status            Kind = "STATUS"
	// ApprovalRequested: a call waits for a person's decision.
	ApprovalRequested Kind = "APPROVAL_REQUESTED"
	// ApprovalDecided: a person (or the timeout) decided on a call.
	ApprovalDecided Kind = "APPROVAL_DECIDED"
)

// Event is one thing that happened in a turn.
type Event struct {
	Kind   Kind
	TurnID int
	// ToolCallID is set for tool call events; on a STATUS event
	// WAITING_FOR_CLARIFICATION after a step's approvals were decided, it is
	// the call whose question the turn now waits on (it places the event
	// within the pause; clients are not told it).
	ToolCallID int
	// Step is the model call the event belongs to, counted from 0: the
	// call itself, the one that asked for a tool call, or the one whose
	// question a STATUS event of a pause (or of its answer) follows.
	Step int
	// Status is the turn's status as of the event: what it announces,
	// whatever the turn has become by the time a subscriber reads it.
	Status string
	At     time.Time
	// Decided marks the tool call events of a call that ran (or was
	// declined) after a person's decision: they follow the turn's return
	// to RUNNING, after the pause, in its step.
	Decided bool `json:",omitempty"`
}

// Buffer is how many events a subscriber may fall behind by.
const Buffer = 256

// Bus delivers events to the subscribers of each turn.
type Bus struct {
	mu   sync.Mutex
	subs map[int]map[*Subscription]struct{}
	// forward, when set, carries events published here to other replicas,
	// and forwardPiece the pieces of the streams written here.
	forward      func(Event)
	forwardPiece func(Piece)
	// streams holds each turn's model call in flight (stream.go).
	streams map[int]*stream
	swept   time.Time
	// ask, when set, asks other replicas for a turn's stream whole.
	ask func(turnID int)
}

// Asking sets how other replicas are asked for a turn's stream.
func (b *Bus) Asking(f func(turnID int)) {
	b.mu.Lock()
	b.ask = f
	b.mu.Unlock()
}

// Ask asks the other replicas for a turn's stream, which arrives as
// pieces (DeliverPiece) when one of them streams it; alone, it does
// nothing.
func (b *Bus) Ask(turnID int) {
	b.mu.Lock()
	ask := b.ask
	b.mu.Unlock()
	if ask != nil {
		ask(turnID)
	}
}

// Forward sets where events published on this bus are also sent: another
// replica's bus, through a Bridge.
func (b *Bus) Forward(f func(Event)) {
	b.mu.Lock()
	b.forward = f
	b.mu.Unlock()
}

// ForwardPieces sets where the pieces of streams written here are also
// sent: another replica's bus, through a Bridge.
func (b *Bus) ForwardPieces(f func(Piece)) {
	b.mu.Lock()
	b.forwardPiece = f
	b.mu.Unlock()
}

// NewBus returns an empty bus.
func NewBus() *Bus {
	return &Bus{subs: map[int]map[*Subscription]struct{}{}, streams: map[int]*stream{}}
}

// Subscription receives one turn's events on C until Close, and a signal
// on Text whenever the turn's stream changed (read it with Bus.Text). An
// event received is shared by the turn's subscribers: read it, never
// change it. (Pointers keep a subscription's buffer of Buffer events a
// couple of kilobytes, where events themselves would take tens.)
type Subscription struct {
	C       <-chan *Event
	c       chan *Event
	Text    <-chan struct{}
	text    chan struct{}
	bus     *Bus
	turnID  int
	dropped atomic.Int64
	once    sync.Once
}

// Subscribe returns a subscription to a turn's events.
func (b *Bus) Subscribe(turnID int) *Subscription {
	c, text := make(chan *Event, Buffer), make(chan struct{}, 1)
	s := &Subscription{C: c, c: c, Text: text, text: text, bus: b, turnID: turnID}
	b.mu.Lock()
	if b.subs[turnID] == nil {
		b.subs[turnID] = map[*Subscription]struct{}{}
	}
	b.subs[turnID][s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close ends the subscription and closes C.
func (s *Subscription) Close() {
	s.once.Do(func() {
		b := s.bus
		b.mu.Lock()
		delete(b.subs[s.turnID], s)
		if len(b.subs[s.turnID]) == 0 {
			delete(b.subs, s.turnID)
		}
		close(s.c)
		b.mu.Unlock()
	})
}

// Dropped is how many events this subscriber missed by falling behind
// (text is never missed: it is read from the stream).
func (s *Subscription) Dropped() int64 { return s.dropped.Load() }

// Publish sends e to the turn's subscribers here, and to other replicas
// when the bus is bridged, without waiting for them.
func (b *Bus) Publish(e Event) {
	b.mu.Lock()
	forward := b.forward
	b.mu.Unlock()
	b.Deliver(e)
	if forward != nil {
		forward(e)
	}
}

// Deliver sends e to this replica's subscribers only.
func (b *Bus) Deliver(e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended(e)
	subs := b.subs[e.TurnID]
	if len(subs) == 0 {
		return
	}
	shared := &e
	for s := range subs {
		select {
		case s.c <- shared:
		default:
			s.dropped.Add(1)
		}
	}
}

// Subscribers returns how many subscriptions a turn has, for tests and
// metrics.
func (b *Bus) Subscribers(turnID int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[turnID])
}
