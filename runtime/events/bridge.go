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
	"time"

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
	queued  []Event
	dropped int // events dropped from a full queue since the last send
	sending bool
	// idle is signalled whenever the sender has sent all it was given.
	idle *sync.Cond
	wake chan struct{}
	stop chan struct{}
}

// wireEvent is one notification: several events (Events), or one (the
// embedded Event: what replicas before batching send).
type wireEvent struct {
	Origin string  `json:"o"`
	Events []Event `json:"e,omitempty"`
	Event
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
)

// NewBridge listens on Channel with its own connection to dsn and forwards
// the bus's events through db.
func NewBridge(dsn string, db *sql.DB, bus *Bus, log *slog.Logger) (*Bridge, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	br := &Bridge{bus: bus, db: db, origin: hex.EncodeToString(b), log: log, done: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
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
	br.wg.Add(2)
	go br.receive()
	go br.sender()
	return br, nil
}

// enqueue queues e for the sender; it never waits.
func (br *Bridge) enqueue(e Event) {
	br.mu.Lock()
	if len(br.queued) >= maxQueued {
		br.queued = br.queued[1:]
		br.dropped++
	}
	br.queued = append(br.queued, e)
	br.mu.Unlock()
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
		select {
		case <-time.After(gather):
		case <-br.stop:
		}
		br.sendQueued()
	}
}

// sendQueued sends every queued event, several to a notification.
func (br *Bridge) sendQueued() {
	br.mu.Lock()
	batch, dropped := br.queued, br.dropped
	br.queued, br.dropped = nil, 0
	br.sending = len(batch) > 0
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

// payload encodes as many of events, from the first, as fit in one
// notification, and says how many; at least one (an event too large to
// send at all is dropped: payload is nil).
func (br *Bridge) payload(events []Event) ([]byte, int) {
	origin, _ := json.Marshal(br.origin)
	out := append(append([]byte(`{"o":`), origin...), `,"e":[`...)
	n := 0
	for _, e := range events {
		raw, err := json.Marshal(e)
		if err != nil || len(out)+len(raw)+3 > maxPayload {
			break
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, raw...)
		n++
	}
	if n == 0 {
		return nil, 1
	}
	return append(out, "]}"...), n
}

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
			if len(w.Events) == 0 {
				br.bus.Deliver(w.Event)
			}
			for _, e := range w.Events {
				br.bus.Deliver(e)
			}
		}
	}
}

// Close stops forwarding, sends what was queued, and stops listening.
func (br *Bridge) Close() error {
	br.bus.Forward(nil)
	close(br.stop)
	close(br.done)
	err := br.listener.Close()
	br.wg.Wait()
	return err
}
