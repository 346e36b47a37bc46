// Package throttle keeps a log readable while something fails over and
// over: a message repeated within its back-off is dropped and counted, and
// each back-off doubles while the repeats go on, so an outage that a
// library reports on every poll (a job queue's fetch, 20 times a second)
// costs one line per back-off, each saying how many it stands for.
package throttle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults for New.
const (
	DefaultFirst = time.Second
	DefaultMax   = time.Minute
)

// Options tune a throttled handler; zero values take the defaults.
type Options struct {
	// First is the first back-off after a message is logged; each repeat
	// logged while the message keeps coming doubles it, up to Max.
	First, Max time.Duration
	// Level: records below it pass untouched. Zero: warnings and errors
	// are throttled.
	Level slog.Level
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// New returns a handler that passes records to h, throttling repeats of
// each message at or above the level.
func New(h slog.Handler, o Options) slog.Handler {
	if o.First <= 0 {
		o.First = DefaultFirst
	}
	if o.Max <= 0 {
		o.Max = DefaultMax
	}
	if o.Level == 0 {
		o.Level = slog.LevelWarn
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &handler{next: h, s: &state{opts: o, seen: map[string]*backoff{}}}
}

type state struct {
	opts Options
	mu   sync.Mutex
	seen map[string]*backoff
}

// backoff is one message's: when it may be logged again, the current wait,
// and how many repeats were dropped since it was last logged.
type backoff struct {
	next    time.Time
	wait    time.Duration
	dropped int
}

type handler struct {
	next slog.Handler
	s    *state
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.s.opts.Level {
		return h.next.Handle(ctx, r)
	}
	dropped, ok := h.s.admit(r.Message)
	if !ok {
		return nil
	}
	if dropped > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeats_dropped", dropped))
	}
	return h.next.Handle(ctx, r)
}

// admit reports whether a record with msg is logged now, and how many
// repeats it stands for.
func (s *state) admit(msg string) (int, bool) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.seen[msg]
	switch {
	case b == nil:
		if len(s.seen) >= maxMessages {
			clear(s.seen) // bounded: messages are a library's constants
		}
		s.seen[msg] = &backoff{next: now.Add(s.opts.First), wait: s.opts.First}
		return 0, true
	case now.Before(b.next):
		b.dropped++
		return 0, false
	}
	dropped := b.dropped
	b.dropped = 0
	// Quiet for longer than the back-off: a new failure, start again.
	// Repeats since the last line: the failure goes on, wait longer.
	if now.Sub(b.next) > b.wait {
		b.wait = s.opts.First
	} else if dropped > 0 {
		b.wait = min(2*b.wait, s.opts.Max)
	}
	b.next = now.Add(b.wait)
	return dropped, true
}

// maxMessages bounds the messages remembered.
const maxMessages = 1024

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{next: h.next.WithAttrs(as), s: h.s}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), s: h.s}
}
