package events

import (
	"crypto/rand"
	"encoding/hex"
	"time"
	"unicode/utf8"
)

// The kinds of a model call's stream. They never travel on a
// Subscription's C: the text is kept once per turn (Bus.Text), and a
// subscriber is only woken (Subscription.Text) to read what is new, so a
// subscriber that falls behind reads one piece for all it missed.
const (
	TextDelta       Kind = "TEXT_DELTA"
	ToolCallWriting Kind = "TOOL_CALL_WRITING"
)

// Writing is a tool call the model has begun to write.
type Writing struct {
	// Index is the call's place among the step's calls, from 0.
	Index int    `json:"i"`
	Name  string `json:"n"`
	// Chars is how many characters of arguments it had written when last
	// told (progress is told at most every ProgressEvery).
	Chars int `json:"c,omitempty"`
}

// Text is what a replica knows of a turn's model call in flight: the text
// from the step's start, and the tool calls the model began to write.
type Text struct {
	Step int
	// Attempt names one try of the call: a call made again (a retry, or a
	// resume on another replica) has a new attempt, whose text starts
	// afresh.
	Attempt string
	// Tail is the text from byte From (as asked of Bus.Text) to the end.
	Tail string
	// From and Bytes are the byte offsets of Tail in the whole text.
	From, Bytes int
	// Chars is the whole text's length in characters (code points).
	Chars int
	Calls []Writing
	// Synced reports whether this replica holds the whole text so far: a
	// replica that heard the stream from its start, or was sent it since.
	Synced bool
	// Done: the call ended and its text is recorded.
	Done bool
	// At is when it last changed.
	At time.Time
}

// Piece is one change to a stream as it crosses between replicas: text
// placed at a character offset (Offset 0 with a new Attempt starts the
// attempt afresh), and the tool calls begun so far.
type Piece struct {
	TurnID  int       `json:"t"`
	Step    int       `json:"s"`
	Attempt string    `json:"a"`
	Offset  int       `json:"o"`
	Text    string    `json:"x,omitempty"`
	Calls   []Writing `json:"w,omitempty"`
	// Whole marks the last piece of a snapshot sent on request: with it
	// the receiver holds the whole text.
	Whole bool `json:"z,omitempty"`
}

// Limits of streams.
const (
	// ProgressEvery bounds how often a tool call's growing arguments are
	// told.
	ProgressEvery = 250 * time.Millisecond
	// MaxStreamBytes bounds the text a replica keeps of one model call;
	// past it the rest is told at the call's end, from what is recorded.
	MaxStreamBytes = 4 << 20
	// linger is how long a finished stream is kept, for subscribers that
	// are still catching up on it.
	linger = time.Minute
	// staleAfter drops another replica's stream that stopped changing (its
	// replica died without telling).
	staleAfter = 5 * time.Minute
)

// stream is one turn's model call in flight, as this replica knows it.
type stream struct {
	step    int
	attempt string
	text    []byte
	chars   int
	calls   []Writing
	synced  bool
	done    bool
	at      time.Time
	// local: this replica's runner writes it.
	local bool
}

// Writer is how a turn's runner streams one model call. Its methods never
// block on subscribers or on other replicas.
type Writer struct {
	bus     *Bus
	turnID  int
	step    int
	partial []byte // an incomplete UTF-8 sequence, held back
	told    time.Time
	started bool
}

// Begin starts streaming a turn's model call. It names a new attempt at
// once: subscribers holding text of an earlier try of the same step are
// told to drop it.
func (b *Bus) Begin(turnID, step int) *Writer {
	w := &Writer{bus: b, turnID: turnID, step: step}
	w.restart()
	return w
}

// Restart starts the call's text afresh: the provider is asking again.
func (w *Writer) Restart() {
	w.partial = nil
	w.restart()
}

func (w *Writer) restart() {
	b := w.bus
	now := time.Now()
	b.mu.Lock()
	b.sweep(now)
	s := &stream{step: w.step, attempt: newAttempt(), synced: true, at: now, local: true}
	b.streams[w.turnID] = s
	p := Piece{TurnID: w.turnID, Step: w.step, Attempt: s.attempt}
	b.wake(w.turnID)
	fwd := b.forwardPiece
	b.mu.Unlock()
	if fwd != nil {
		fwd(p)
	}
}

// Text adds a piece of the answer's text.
func (w *Writer) Text(piece string) {
	if piece == "" {
		return
	}
	data := append(w.partial, piece...)
	// Hold back a character whose bytes have not all arrived.
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	w.partial = append([]byte(nil), data[cut:]...)
	if cut == 0 {
		return
	}
	text := string(data[:cut])
	b := w.bus
	b.mu.Lock()
	s := b.own(w)
	if s == nil {
		b.mu.Unlock()
		return
	}
	p := Piece{TurnID: w.turnID, Step: w.step, Attempt: s.attempt, Offset: s.chars, Text: text}
	if len(s.text)+len(text) <= MaxStreamBytes {
		s.text = append(s.text, text...)
		s.chars += utf8.RuneCountInString(text)
	} else {
		s.synced = false
	}
	s.at = time.Now()
	b.wake(w.turnID)
	fwd := b.forwardPiece
	b.mu.Unlock()
	if fwd != nil {
		fwd(p)
	}
}

// ToolCall says the model began writing call index, a call to name.
func (w *Writer) ToolCall(index int, name string) {
	w.call(index, name, 0, true)
}

// ToolArguments says the model has written chars characters of call
// index's arguments; told at most every ProgressEvery.
func (w *Writer) ToolArguments(index, chars int) {
	if time.Since(w.told) < ProgressEvery {
		return
	}
	w.call(index, "", chars, false)
}

func (w *Writer) call(index int, name string, chars int, begin bool) {
	b := w.bus
	b.mu.Lock()
	s := b.own(w)
	if s == nil {
		b.mu.Unlock()
		return
	}
	i := len(s.calls) - 1
	for i >= 0 && s.calls[i].Index != index {
		i--
	}
	switch {
	case i < 0 && begin:
		s.calls = append(s.calls, Writing{Index: index, Name: name})
	case i >= 0 && !begin && chars > s.calls[i].Chars:
		s.calls[i].Chars = chars
	default:
		b.mu.Unlock()
		return
	}
	w.told = time.Now()
	s.at = w.told
	p := Piece{TurnID: w.turnID, Step: w.step, Attempt: s.attempt, Offset: s.chars, Calls: append([]Writing(nil), s.calls...)}
	b.wake(w.turnID)
	fwd := b.forwardPiece
	b.mu.Unlock()
	if fwd != nil {
		fwd(p)
	}
}

// End says the call ended and its text is recorded. The stream is kept a
// while for subscribers still reading it.
func (w *Writer) End() {
	b := w.bus
	b.mu.Lock()
	if s := b.own(w); s != nil {
		s.done = true
		s.at = time.Now()
		b.wake(w.turnID)
	}
	b.mu.Unlock()
}

// own is w's stream, unless another replaced it; b.mu is held.
func (b *Bus) own(w *Writer) *stream {
	s := b.streams[w.turnID]
	if s == nil || !s.local || s.step != w.step {
		return nil
	}
	return s
}

// Text returns what this replica knows of the turn's model call in flight
// (or just finished), with the text from byte from on when from is within
// the attempt's text, else all of it.
func (b *Bus) Text(turnID, from int) (Text, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streams[turnID]
	if s == nil {
		return Text{}, false
	}
	if from < 0 || from > len(s.text) {
		from = 0
	}
	return Text{Step: s.step, Attempt: s.attempt, Tail: string(s.text[from:]), From: from, Bytes: len(s.text),
		Chars: s.chars, Calls: append([]Writing(nil), s.calls...), Synced: s.synced, Done: s.done, At: s.at}, true
}

// Streaming reports whether this replica's runner is streaming the turn's
// model call now.
func (b *Bus) Streaming(turnID int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streams[turnID]
	return s != nil && s.local && !s.done
}

// DeliverPiece applies a piece another replica sent to this replica's copy
// of the stream, and wakes the turn's subscribers here. It reports whether
// the copy has a gap (it missed earlier text) that a snapshot must fill.
func (b *Bus) DeliverPiece(p Piece) (gap bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	s := b.streams[p.TurnID]
	if s != nil && s.local {
		return false // this replica writes it
	}
	if s == nil || s.step != p.Step || s.attempt != p.Attempt {
		if s != nil && s.step > p.Step {
			return false // an older call's late piece
		}
		b.sweep(now)
		s = &stream{step: p.Step, attempt: p.Attempt, synced: p.Offset == 0, at: now}
		b.streams[p.TurnID] = s
	}
	s.at = now
	if p.Text != "" {
		switch {
		case p.Offset > s.chars:
			s.synced = false
		case p.Offset+utf8.RuneCountInString(p.Text) > s.chars:
			// Overlap is the same text: add what lies past what is held.
			skip := s.chars - p.Offset
			i := 0
			for ; skip > 0 && i < len(p.Text); skip-- {
				_, n := utf8.DecodeRuneInString(p.Text[i:])
				i += n
			}
			if len(s.text)+len(p.Text)-i <= MaxStreamBytes {
				s.text = append(s.text, p.Text[i:]...)
				s.chars += utf8.RuneCountInString(p.Text[i:])
			} else {
				s.synced = false
			}
		}
	}
	if p.Whole && p.Offset <= s.chars {
		s.synced = true
	}
	if len(p.Calls) >= len(s.calls) {
		s.calls = p.Calls
	}
	b.wake(p.TurnID)
	return !s.synced
}

// ended marks the turn's stream of step done (its call is recorded), once
// the step's end is heard from another replica; b.mu is held.
func (b *Bus) ended(e Event) {
	s := b.streams[e.TurnID]
	if s == nil || s.local {
		return
	}
	if e.Kind == ModelCallFinished && s.step == e.Step || e.Kind == Status && e.Status != "RUNNING" {
		s.done = true
	}
}

// Snapshot returns the turn's stream as pieces from offset 0, each at
// most size bytes of text, the last marked Whole, when this replica's
// runner streams it.
func (b *Bus) Snapshot(turnID, size int) []Piece {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streams[turnID]
	if s == nil || !s.local || s.done {
		return nil
	}
	var out []Piece
	off, text := 0, string(s.text)
	for {
		n := min(len(text), size)
		for n < len(text) && n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		out = append(out, Piece{TurnID: turnID, Step: s.step, Attempt: s.attempt, Offset: off, Text: text[:n]})
		off += utf8.RuneCountInString(text[:n])
		text = text[n:]
		if text == "" {
			break
		}
	}
	last := &out[len(out)-1]
	last.Calls, last.Whole = append([]Writing(nil), s.calls...), true
	return out
}

// wake tells the turn's subscribers here that its stream changed, without
// waiting for any; b.mu is held.
func (b *Bus) wake(turnID int) {
	for s := range b.subs[turnID] {
		select {
		case s.text <- struct{}{}:
		default:
		}
	}
}

// sweep drops streams nobody needs any more, at most every few seconds;
// b.mu is held.
func (b *Bus) sweep(now time.Time) {
	if now.Sub(b.swept) < 5*time.Second {
		return
	}
	b.swept = now
	for id, s := range b.streams {
		if s.done && now.Sub(s.at) > linger || !s.local && now.Sub(s.at) > staleAfter {
			delete(b.streams, id)
		}
	}
}

func newAttempt() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
