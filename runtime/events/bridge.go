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
type Bridge struct {
	bus      *Bus
	db       *sql.DB
	listener *pq.Listener
	origin   string
	log      *slog.Logger
	done     chan struct{}
	wg       sync.WaitGroup
}

type wireEvent struct {
	Origin string `json:"o"`
	Event
}

// NewBridge listens on Channel with its own connection to dsn and forwards
// the bus's events through db.
func NewBridge(dsn string, db *sql.DB, bus *Bus, log *slog.Logger) (*Bridge, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	br := &Bridge{bus: bus, db: db, origin: hex.EncodeToString(b), log: log, done: make(chan struct{})}
	br.listener = pq.NewListener(dsn, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		if err != nil {
			log.Warn("event bridge connection", "event", ev, "err", err)
		}
	})
	if err := br.listener.Listen(Channel); err != nil {
		_ = br.listener.Close()
		return nil, fmt.Errorf("listen for turn events: %w", err)
	}
	bus.Forward(br.send)
	br.wg.Add(1)
	go br.receive()
	return br, nil
}

func (br *Bridge) send(e Event) {
	payload, err := json.Marshal(wireEvent{Origin: br.origin, Event: e})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := br.db.ExecContext(ctx, "SELECT pg_notify($1, $2)", Channel, string(payload)); err != nil {
		br.log.Warn("forward turn event", "err", err)
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
			br.bus.Deliver(w.Event)
		}
	}
}

// Close stops forwarding and listening.
func (br *Bridge) Close() error {
	br.bus.Forward(nil)
	close(br.done)
	err := br.listener.Close()
	br.wg.Wait()
	return err
}
