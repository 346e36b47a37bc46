package graph

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/toolgate/toolgate/runtime/events"
)

// position is how far a subscriber has been told a turn's events: what a
// seq says. Its first fields grow with every event told (the seq's
// sortable part); the rest say exactly what was told within the step, so
// a resumed subscription, on any replica, tells what came after and
// nothing twice.
type position struct {
	step, phase int
	// resets counts the times the step's text started afresh; pos grows
	// with every character and tool call told of the step's text phase.
	resets, pos int
	// tools counts the tool call events told in the tools phase.
	tools int

	// chars, bytes and hash are the step's text held by the subscriber:
	// its length in characters and in bytes, and its FNV-1a hash.
	chars, bytes int
	hash         uint64
	// attempt names the try of the model call that text is from: "" for
	// none yet, "=" for text read from what is stored.
	attempt string
	// calls is how many tool calls being written were told; args the
	// last one's argument characters.
	calls, args int
	// started and finished are the tool calls told in the tools phase.
	started, finished []int
	// model: the step's MODEL_CALL_STARTED was told (a step rebuilt from
	// tool calls alone has its start told when it is heard).
	model bool
}

const fnvBasis, fnvPrime = 14695981039346656037, 1099511628211

func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// startPosition is where a subscriber that was told nothing stands.
func startPosition() position { return position{phase: -1, hash: fnvBasis} }

// seq encodes p: a fixed-width hexadecimal part that sorts as the events
// happen, then what the rest of p says, which never decides the order (no
// two events share the first part).
func (p *position) seq() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%05x%01x%03x%08x%04x.%x.%x.%016x.%s.%x.%x.", p.step, max(p.phase, 0), p.resets, p.pos, p.tools,
		p.chars, p.bytes, p.hash, cmpOr(p.attempt, "-"), p.calls, p.args)
	ids := func(list []int) {
		for i, id := range list {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(int64(id), 36))
		}
	}
	ids(p.started)
	b.WriteByte('.')
	ids(p.finished)
	if p.model {
		b.WriteString(".m")
	} else {
		b.WriteString(".")
	}
	return b.String()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// errBadSeq is what a seq that is not one of ours reads as.
func errBadSeq() error {
	e := gqlerror.Errorf("after is not a seq of this turn's events: pass the seq of the last event read")
	e.Extensions = map[string]any{"code": "BAD_USER_INPUT"}
	return e
}

// parseSeq reads a seq back into the position it encodes.
func parseSeq(s string) (position, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 10 || len(parts[0]) != 21 || parts[9] != "" && parts[9] != "m" {
		return position{}, errBadSeq()
	}
	hex := func(s string, bits int) (int, bool) {
		v, err := strconv.ParseUint(s, 16, bits)
		return int(v), err == nil
	}
	var p position
	var ok [8]bool
	head := parts[0]
	p.step, ok[0] = hex(head[:5], 32)
	p.phase, ok[1] = hex(head[5:6], 8)
	p.resets, ok[2] = hex(head[6:9], 16)
	p.pos, ok[3] = hex(head[9:17], 40)
	p.tools, ok[4] = hex(head[17:21], 20)
	p.chars, ok[5] = hex(parts[1], 40)
	p.bytes, ok[6] = hex(parts[2], 40)
	h, err := strconv.ParseUint(parts[3], 16, 64)
	ok[7] = err == nil
	p.hash = h
	if slices.Contains(ok[:], false) || p.phase > events.PhaseEnd || p.bytes < p.chars {
		return position{}, errBadSeq()
	}
	p.model = parts[9] == "m"
	if p.attempt = parts[4]; p.attempt == "-" {
		p.attempt = ""
	}
	var okc, oka bool
	p.calls, okc = hex(parts[5], 32)
	p.args, oka = hex(parts[6], 40)
	if !okc || !oka {
		return position{}, errBadSeq()
	}
	for i, list := range []*[]int{&p.started, &p.finished} {
		if parts[7+i] == "" {
			continue
		}
		for _, f := range strings.Split(parts[7+i], ",") {
			id, err := strconv.ParseInt(f, 36, 64)
			if err != nil || id <= 0 || len(*list) >= 10_000 {
				return position{}, errBadSeq()
			}
			*list = append(*list, int(id))
		}
	}
	return p, nil
}

// covers reports whether a subscriber at p was told the event already.
func (p *position) covers(kind events.Kind, step, phase, toolCallID int) bool {
	if phase >= events.PhaseAnswer {
		return p.phase >= phase
	}
	if step != p.step {
		return step < p.step
	}
	if kind == events.ModelCallStarted {
		return p.model
	}
	if phase != p.phase {
		return phase < p.phase
	}
	switch kind {
	case events.ToolCallStarted:
		return slices.Contains(p.started, toolCallID) || slices.Contains(p.finished, toolCallID)
	case events.ToolCallFinished:
		return slices.Contains(p.finished, toolCallID)
	case events.ApprovalRequested:
		return slices.Contains(p.started, toolCallID) || slices.Contains(p.finished, toolCallID)
	case events.ApprovalDecided:
		return slices.Contains(p.finished, toolCallID)
	case events.Status:
		// The pause's own STATUS opens the phase; one naming a call (the
		// question asked after the step's decisions) is one of its events.
		return toolCallID == 0 || slices.Contains(p.finished, toolCallID)
	}
	return true
}

// advance moves p to an event told at step and phase.
func (p *position) advance(kind events.Kind, step, phase, toolCallID int) {
	if phase >= events.PhaseAnswer {
		p.phase = phase
		return
	}
	if kind == events.ModelCallStarted && step == p.step && p.phase > events.PhaseModel {
		// Heard after later events of its step (their rows were read
		// without its own): told where the subscriber stands.
		p.model = true
		p.tools++
		return
	}
	if step != p.step {
		*p = position{step: step, phase: phase, hash: fnvBasis}
	} else if phase != p.phase {
		p.phase, p.tools, p.started, p.finished = phase, 0, nil, nil
	}
	switch kind {
	case events.ModelCallStarted:
		p.model = true
	case events.ToolCallStarted:
		p.started = append(p.started, toolCallID)
		p.tools++
	case events.ApprovalRequested:
		p.started = append(p.started, toolCallID)
		p.tools++
	case events.ApprovalDecided:
		if !slices.Contains(p.started, toolCallID) {
			p.started = append(p.started, toolCallID)
		}
		p.finished = append(p.finished, toolCallID)
		p.tools++
	case events.Status:
		if toolCallID != 0 {
			p.finished = append(p.finished, toolCallID)
			p.tools++
		}
	case events.ToolCallFinished:
		if !slices.Contains(p.started, toolCallID) {
			p.started = append(p.started, toolCallID)
		}
		p.finished = append(p.finished, toolCallID)
		p.tools++
	}
}

// told adds text told at the end of what the subscriber holds.
func (p *position) told(text string) {
	n := utf8.RuneCountInString(text)
	p.chars += n
	p.bytes += len(text)
	p.pos += n
	p.hash = fnvAdd(p.hash, text)
}

// restart empties the step's text: it starts afresh from attempt.
func (p *position) restart(attempt string) {
	p.resets++
	p.chars, p.bytes, p.hash, p.calls, p.args = 0, 0, fnvBasis, 0, 0
	p.attempt = attempt
}

// holds reports whether the subscriber's text of the step is text's start.
func (p *position) holds(text string) bool {
	return p.bytes <= len(text) && fnvAdd(fnvBasis, text[:p.bytes]) == p.hash
}
