package events

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/lib/pq"
)

// Channel is the PostgreSQL notification channel turn events travel on.
const Channel = "toolgate_turn_events"

// Bridge fans turn events out across replicas that share one PostgreSQL
// database, with LISTEN/NOTIFY: what a runner publishes on one replica
// reaches subscribers connected to any other. Notifications are not
// stored: a replica that is down misses them, and its subscribers learn
// the turn's state from the database when they reconnect.
//
// Publishing never waits for the database: events are queued, and a
// sender of the bridge's own sends what has gathered, in order, several
// events to a notification (a step's events are published within a
// moment of each other), off the turn's critical path.
type Bridge struct {
	bus      *Bus
	db       *sql.DB
	listener *pq.Listener
	origin   string
	log      *slog.Logger
	done     chan struct{}
	wg       sync.WaitGroup

	mu      sync.Mutex
	queued  []item
	dropped int // events dropped from a full queue since the last send
	sending bool
	// durable counts the queued items that are events, not pieces: those
	// go within gather, pieces alone wait for PieceEvery.
	durable int
	// latest is each turn's last queued piece, while no event of the
	// turn follows it: a new piece of the same stream joins it.
	latest map[int]int
	// sent is when the last notification went; asked is when each turn's
	// stream was last asked of the other replicas.
	sent  time.Time
	asked map[int]time.Time
	// notified counts the notifications sent.
	notified atomic.Int64
	// idle is signalled whenever the sender has sent all it was given.
	idle *sync.Cond
	wake chan struct{}
	stop chan struct{}
}

// wireEvent is one notification: several events (Events), or one (the
// embedded Event: what replicas before batching send); the pieces of
// streams, applied before the events (Pieces); what followed them, in
// order (Rest); and the turns whose stream a replica asks to be sent
// whole (Asks). Replicas before Rest apply the first group alone: while
// such replicas run beside this one, their subscribers may miss events,
// and read the turn when they come back.
type wireEvent struct {
	Origin string `json:"o"`
	wireGroup
	Rest []wireGroup `json:"r,omitempty"`
	Asks []int       `json:"q,omitempty"`
	Event
}

// wireGroup is pieces, then the events that followed them.
type wireGroup struct {
	Events []Event `json:"e,omitempty"`
	Pieces []Piece `json:"d,omitempty"`
}

// item is one queued event, piece or ask.
type item struct {
	Event
	piece *Piece
	ask   bool
}

const (
	// gather is how long the sender lets events gather once one is
	// queued: a step's events come within a few milliseconds of each
	// other, and a person watching sees no difference.
	gather = 5 * time.Millisecond
	// maxPayload keeps a notification under PostgreSQL's 8000 bytes.
	maxPayload = 7000
	// maxQueued bounds the events waiting for a database that does not
	// answer; past it the oldest are dropped (notifications are not kept
	// anyway, and subscribers read the turn when they come back).
	maxQueued = 10000
	// PieceEvery is how often the pieces of streams go to other replicas:
	// what a model writes in between is joined into one piece per turn,
	// so a streaming turn costs a bounded number of notifications a
	// second however fast the model writes.
	PieceEvery = 75 * time.Millisecond
	// askEvery bounds how often one turn's stream is asked for.
	askEvery = 500 * time.Millisecond
	// snapshotPiece is the text of one piece of a stream sent whole.
	snapshotPiece = 3000
)

// NewBridge listens on Channel with its own connection to dsn and forwards
// the bus's events through db.
func NewBridge(dsn string, db *sql.DB, bus *Bus, log *slog.Logger) (*Bridge, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	br := &Bridge{bus: bus, db: db, origin: hex.EncodeToString(b), log: log, done: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), latest: map[int]int{}, asked: map[int]time.Time{}}
	br.idle = sync.NewCond(&br.mu)
	br.listener = pq.NewListener(dsn, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		if err != nil {
			log.Warn("event bridge connection", "event", ev, "err", err)
		}
	})
	if err := br.listener.Listen(Channel); err != nil {
		_ = br.listener.Close()
		return nil, fmt.Errorf("listen for turn events: %w", err)
	}
	bus.Forward(br.enqueue)
	bus.ForwardPieces(br.enqueuePiece)
	bus.Asking(br.Ask)
	br.wg.Add(2)
	go br.receive()
	go br.sender()
	return br, nil
}

// enqueue queues e for the sender; it never waits.
func (br *Bridge) enqueue(e Event) {
	br.mu.Lock()
	delete(br.latest, e.TurnID)
	br.push(item{Event: e})
	br.mu.Unlock()
	br.signal()
}

// enqueuePiece queues a stream's piece, joined to the turn's last queued
// piece when it continues it; it never waits.
func (br *Bridge) enqueuePiece(p Piece) {
	br.mu.Lock()
	if i, ok := br.latest[p.TurnID]; ok && i < len(br.queued) {
		last := br.queued[i].piece
		if last != nil && !last.Whole && last.Step == p.Step && last.Attempt == p.Attempt &&
			last.Offset+utf8.RuneCountInString(last.Text) == p.Offset {
			last.Text += p.Text
			if p.Calls != nil {
				last.Calls = p.Calls
			}
			br.mu.Unlock()
			return
		}
	}
	br.push(item{Event: Event{TurnID: p.TurnID}, piece: &p})
	br.latest[p.TurnID] = len(br.queued) - 1
	br.mu.Unlock()
	br.signal()
}

// Ask asks the other replicas for the turn's stream whole: the replica
// that runs it sends it, and this one's subscribers read it as it comes.
// A turn is asked at most every askEvery.
func (br *Bridge) Ask(turnID int) {
	br.mu.Lock()
	if time.Since(br.asked[turnID]) < askEvery {
		br.mu.Unlock()
		return
	}
	br.asked[turnID] = time.Now()
	if len(br.asked) > 1000 {
		for id, at := range br.asked {
			if time.Since(at) > askEvery {
				delete(br.asked, id)
			}
		}
	}
	br.push(item{Event: Event{TurnID: turnID}, ask: true})
	br.mu.Unlock()
	br.signal()
}

// push queues it, dropping the oldest past maxQueued; br.mu is held.
func (br *Bridge) push(it item) {
	if len(br.queued) >= maxQueued {
		if br.queued[0].piece == nil {
			br.durable--
		}
		br.queued = br.queued[1:]
		br.dropped++
		for id, i := range br.latest {
			if i == 0 {
				delete(br.latest, id)
			} else {
				br.latest[id] = i - 1
			}
		}
	}
	if it.piece == nil {
		br.durable++
	}
	br.queued = append(br.queued, it)
}

func (br *Bridge) signal() {
	select {
	case br.wake <- struct{}{}:
	default:
	}
}

// sender sends the queued events until Close, then what is left.
func (br *Bridge) sender() {
	defer br.wg.Done()
	for {
		select {
		case <-br.stop:
			br.sendQueued()
			return
		case <-br.wake:
		}
		// Events go within gather: a replica's events reach the others
		// before a replica that takes its turn over can send its own.
		// Pieces alone wait until PieceEvery has passed since the last
		// notification, gathering what the model writes.
		wait := gather
		br.mu.Lock()
		if br.durable == 0 {
			wait = max(gather, time.Until(br.sent.Add(PieceEvery)))
		}
		br.mu.Unlock()
		select {
		case <-time.After(wait):
		case <-br.stop:
		}
		br.sendQueued()
	}
}

// sendQueued sends every queued event, several to a notification.
func (br *Bridge) sendQueued() {
	br.mu.Lock()
	batch, dropped := br.queued, br.dropped
	br.queued, br.dropped, br.durable = nil, 0, 0
	clear(br.latest)
	br.sending = len(batch) > 0
	if len(batch) > 0 && br.db != nil {
		br.sent = time.Now()
	}
	br.mu.Unlock()
	if dropped > 0 {
		// Said once a send, not once an event: other replicas'
		// subscribers missed these, and read the turn when they come back.
		br.log.Warn("dropped turn events for other replicas: the database took too long to send them", "events", dropped)
	}
	for len(batch) > 0 {
		payload, n := br.payload(batch)
		batch = batch[n:]
		if payload == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		br.notified.Add(1)
		if _, err := br.db.ExecContext(ctx, "SELECT pg_notify($1, $2)", Channel, string(payload)); err != nil {
			br.log.Warn("forward turn events", "events", n, "err", err)
		}
		cancel()
	}
	br.mu.Lock()
	br.sending = false
	br.idle.Broadcast()
	br.mu.Unlock()
}

// payload encodes as many of items, from the first, as fit in one
// notification, and says how many; at least one (an event too large to
// send at all is dropped: payload is nil). Pieces go before the events of
// a notification, which its receiver applies first: a piece after an
// event starts the next notification. A piece too large for one is cut
// in two, its first part sent now and the rest left in items.
func (br *Bridge) payload(items []item) ([]byte, int) {
	w := wireEvent{Origin: br.origin}
	size := len(`{"o":"","e":[],"d":[],"r":[],"q":[]}`) + len(br.origin)
	// group is where the next piece or event goes: a piece after an event
	// starts a new one.
	group := &w.wireGroup
	n := 0
pack:
	for ; n < len(items); n++ {
		it := &items[n]
		var raw []byte
		var err error
		grow := 0
		switch {
		case it.ask:
			raw, err = json.Marshal(it.TurnID)
		case it.piece != nil:
			if len(group.Events) > 0 {
				grow = len(`{"e":[],"d":[]},`)
			}
			raw, err = json.Marshal(it.piece)
			if err == nil && size+grow+len(raw)+1 > maxPayload {
				first, ok := cutPiece(it.piece, maxPayload-size-grow-1)
				if !ok {
					break pack
				}
				// The start now, the rest in the next notification.
				it.piece.Text = it.piece.Text[len(first.Text):]
				it.piece.Offset += utf8.RuneCountInString(first.Text)
				if grow > 0 {
					w.Rest = append(w.Rest, wireGroup{})
					group = &w.Rest[len(w.Rest)-1]
				}
				group.Pieces = append(group.Pieces, first)
				return br.encode(w), n
			}
		default:
			raw, err = json.Marshal(it.Event)
		}
		if err != nil || size+grow+len(raw)+1 > maxPayload {
			break
		}
		size += grow + len(raw) + 1
		switch {
		case it.ask:
			w.Asks = append(w.Asks, it.TurnID)
		case it.piece != nil:
			if grow > 0 {
				w.Rest = append(w.Rest, wireGroup{})
				group = &w.Rest[len(w.Rest)-1]
			}
			group.Pieces = append(group.Pieces, *it.piece)
		default:
			group.Events = append(group.Events, it.Event)
		}
	}
	if n == 0 && len(w.Pieces) == 0 {
		return nil, 1
	}
	return br.encode(w), n
}

func (br *Bridge) encode(w wireEvent) []byte {
	out, _ := json.Marshal(struct {
		Origin string      `json:"o"`
		Events []Event     `json:"e,omitempty"`
		Pieces []Piece     `json:"d,omitempty"`
		Rest   []wireGroup `json:"r,omitempty"`
		Asks   []int       `json:"q,omitempty"`
	}{w.Origin, w.Events, w.Pieces, w.Rest, w.Asks})
	return out
}

// cutPiece returns the start of p whose encoding takes at most limit
// bytes, cut between characters, when there is such a start.
func cutPiece(p *Piece, limit int) (Piece, bool) {
	lo, hi := 0, len(p.Text)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		for mid > 0 && !utf8.RuneStart(p.Text[mid]) {
			mid--
		}
		if mid <= lo {
			break
		}
		raw, _ := json.Marshal(Piece{TurnID: p.TurnID, Step: p.Step, Attempt: p.Attempt, Offset: p.Offset, Text: p.Text[:mid]})
		if len(raw) <= limit {
			lo = mid
		} else {
			hi = mid - 1
			for hi > lo && !utf8.RuneStart(p.Text[hi]) {
				hi--
			}
		}
	}
	if lo == 0 {
		return Piece{}, false
	}
	return Piece{TurnID: p.TurnID, Step: p.Step, Attempt: p.Attempt, Offset: p.Offset, Text: p.Text[:lo]}, true
}

// Notifications is how many notifications the bridge has sent.
func (br *Bridge) Notifications() int64 { return br.notified.Load() }

// Flush waits until the events published so far have been sent to the
// database.
func (br *Bridge) Flush() {
	br.mu.Lock()
	defer br.mu.Unlock()
	for len(br.queued) > 0 || br.sending {
		select {
		case br.wake <- struct{}{}:
		default:
		}
		br.idle.Wait()
	}
}

func (br *Bridge) receive() {
	defer br.wg.Done()
	ping := time.NewTicker(90 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-br.done:
			return
		case <-ping.C:
			_ = br.listener.Ping()
		case n, ok := <-br.listener.Notify:
			if !ok {
				return
			}
			if n == nil { // reconnected: nothing to replay, notifications are not kept
				continue
			}
			var w wireEvent
			if err := json.Unmarshal([]byte(n.Extra), &w); err != nil || w.Origin == br.origin {
				continue
			}
			if len(w.Events) == 0 && len(w.Pieces) == 0 && len(w.Rest) == 0 && len(w.Asks) == 0 {
				br.bus.Deliver(w.Event)
			}
			for _, g := range append([]wireGroup{w.wireGroup}, w.Rest...) {
				for _, p := range g.Pieces {
					if br.bus.DeliverPiece(p) {
						br.Ask(p.TurnID)
					}
				}
				for _, e := range g.Events {
					br.bus.Deliver(e)
				}
			}
			for _, id := range w.Asks {
				br.answer(id)
			}
		}
	}
}

// answer sends the turn's stream whole, when this replica's runner
// streams it.
func (br *Bridge) answer(turnID int) {
	pieces := br.bus.Snapshot(turnID, snapshotPiece)
	if len(pieces) == 0 {
		return
	}
	br.mu.Lock()
	delete(br.latest, turnID)
	for i := range pieces {
		br.push(item{Event: Event{TurnID: turnID}, piece: &pieces[i]})
	}
	br.mu.Unlock()
	br.signal()
}

// Close stops forwarding, sends what was queued, and stops listening.
func (br *Bridge) Close() error {
	br.bus.Forward(nil)
	br.bus.ForwardPieces(nil)
	br.bus.Asking(nil)
	close(br.stop)
	close(br.done)
	err := br.listener.Close()
	br.wg.Wait()
	return err
}
