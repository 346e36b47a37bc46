package prompt

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/tools"
)

// Replay settings: the last RecentTurns earlier turns carry an excerpt of
// each tool result, of at most ExcerptChars characters.
const (
	RecentTurns  = 2
	ExcerptChars = 1000
	// DefaultCallsPerTurn is how many tool calls of one earlier turn are
	// replayed when no setting says otherwise.
	DefaultCallsPerTurn = 8
)

// Step is one model call of a turn and the tool calls it asked for, in
// position order.
type Step struct {
	Text  string
	Calls []*ent.ToolCall
}

// Past is an earlier turn as stored.
type Past struct {
	Turn  *ent.Turn
	Steps []Step
	// Sizes are the stored results' sizes in characters, by ref.
	Sizes map[string]int64
	// CallsPerTurn is the most tool calls of the turn replayed (short-term
	// memory); 0 replays them all. Which keep their place: Keep.
	CallsPerTurn int
}

// Keep returns which of a turn's calls (in position order) keep their
// place when at most limit are replayed: first the calls whose results the
// model was shown (evidence) and the failures, then the routine ones
// (absences, acknowledgements); within each, the later call first, being
// nearer the answer. The kept calls stay in their order. limit <= 0 keeps
// every call.
func Keep(calls []*ent.ToolCall, limit int) map[int]bool {
	keep := make(map[int]bool, len(calls))
	if limit <= 0 || len(calls) <= limit {
		for _, c := range calls {
			keep[c.ID] = true
		}
		return keep
	}
	for _, wantMain := range []bool{true, false} {
		for i := len(calls) - 1; i >= 0 && len(keep) < limit; i-- {
			c := calls[i]
			failed := !c.Outcome.Succeeded()
			if (failed || len(c.Evidence) > 0) == wantMain {
				keep[c.ID] = true
			}
		}
	}
	return keep
}

// LeftOutLine is the one terse line a turn carries for the calls the cap
// left out of its replay.
func LeftOutLine(n int) string {
	if n == 1 {
		return "(1 more tool call of this turn is left out here; read_transcript has it.)"
	}
	return fmt.Sprintf("(%d more tool calls of this turn are left out here; read_transcript has them.)", n)
}

// History renders earlier turns for the model, oldest first. It never
// replays a whole result: each call keeps its name, arguments and outcome;
// calls of the last RecentTurns turns add an excerpt. A result that was cut
// carries one terse line (how much was cut, roughly how much there is, the
// ref). Rendering depends only on what is stored and on the turn's distance
// from now, so a turn renders the same way on every later call.
func History(p Person, past []Past) []model.Message {
	var msgs []model.Message
	for i, pt := range past {
		msgs = append(msgs, TurnMessages(p, pt, len(past)-i <= RecentTurns)...)
	}
	return msgs
}

// TurnMessages renders one earlier turn as History does; recent turns (the
// last RecentTurns before now) add an excerpt of each result.
func TurnMessages(p Person, pt Past, recent bool) []model.Message {
	t := pt.Turn
	msgs := []model.Message{{Role: model.RoleUser, Text: UserMessage(p, t.StartedAt, t.TimeZone, t.UserText)}}
	var all []*ent.ToolCall
	for _, st := range pt.Steps {
		all = append(all, st.Calls...)
	}
	keep := Keep(all, pt.CallsPerTurn)
	for _, st := range pt.Steps {
		st.Calls = slices.DeleteFunc(slices.Clone(st.Calls), func(c *ent.ToolCall) bool { return !keep[c.ID] })
		if len(st.Calls) == 0 {
			continue
		}
		am := model.Message{Role: model.RoleAssistant, Text: st.Text}
		cuts := make([][]Cut, len(st.Calls))
		for j, c := range st.Calls {
			var args string
			args, cuts[j] = CapArguments(c.Arguments)
			am.ToolCalls = append(am.ToolCalls, model.ToolCall{ID: CallID(c), Name: c.Name, Arguments: []byte(args)})
		}
		msgs = append(msgs, am)
		for j, c := range st.Calls {
			msgs = append(msgs, model.Message{
				Role: model.RoleTool, ToolCallID: CallID(c), ToolName: c.Name,
				Text:    replay(c, recent, pt.Sizes, cuts[j]),
				IsError: !c.Outcome.Succeeded(),
			})
		}
	}
	answer := ""
	if t.Answer != nil {
		answer = *t.Answer
	}
	if t.Status != "COMPLETED" {
		answer = strings.TrimSpace(answer + fmt.Sprintf("\n\n(This turn ended %s.)", strings.ToLower(string(t.Status))))
	}
	if n := len(all) - len(keep); n > 0 {
		answer = strings.TrimSpace(answer + "\n\n" + LeftOutLine(n))
	}
	if answer != "" {
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, Text: answer})
	}
	return msgs
}

// CallID is the id a stored call goes by in the history: the provider's
// own when it gave one.
func CallID(c *ent.ToolCall) string {
	if c.CallID != "" {
		return c.CallID
	}
	return fmt.Sprintf("call_%d", c.ID)
}

// Replay is what a later turn hears of a call: its outcome and, when
// recent, an excerpt of what the model heard then. A call whose text does
// not fit the excerpt has one terse line (how much is cut, roughly how much
// there is, the ref), and outside the window the same line stands beside
// the outcome. The line depends only on what is stored, so it reads the
// same on every later turn. A result that fits the excerpt crosses whole
// and has no line. sizes gives the stored results' sizes by ref.
//
// A call whose arguments were cut for replay (CapArguments) ends with one
// more line: what was cut, and the ref that holds the arguments whole.
func Replay(c *ent.ToolCall, recent bool, sizes map[string]int64) string {
	_, cuts := CapArguments(c.Arguments)
	return replay(c, recent, sizes, cuts)
}

func replay(c *ent.ToolCall, recent bool, sizes map[string]int64, cuts []Cut) string {
	text := replayResult(c, recent, sizes)
	if len(cuts) == 0 {
		return text
	}
	names := make([]string, len(cuts))
	for i, cut := range cuts {
		names[i] = tools.ArgumentCut(cut.Path, approx(cut.Chars))
	}
	ref := ""
	if c.ArgumentsRef != nil {
		ref = *c.ArgumentsRef
	}
	return text + "\n" + tools.ArgumentsLine(names, ref)
}

func replayResult(c *ent.ToolCall, recent bool, sizes map[string]int64) string {
	heard := ""
	if c.Heard != nil {
		heard = *c.Heard
	}
	outcome := "[" + string(c.Outcome) + "]"
	heardChars := utf8.RuneCountInString(heard)
	// The line is reckoned from the stored result's size alone, never from
	// what is loaded, so it is the same in and out of the window.
	line := ""
	if c.Ref != nil {
		if total := int(sizes[*c.Ref]); total > ExcerptChars {
			line = tools.CutLine(approx(total-ExcerptChars), approx(total), *c.Ref)
		}
	}
	shown := min(heardChars, ExcerptChars)
	switch {
	case !recent && line != "":
		return outcome + " " + line
	case !recent:
		return outcome
	case line == "":
		return outcome + " " + heard
	}
	return outcome + " " + string([]rune(heard)[:shown]) + "\n" + line
}

// approx rounds a count to two significant figures, so the line says how
// much there is without pretending to precision.
func approx(n int) string {
	if n < 100 {
		return fmt.Sprint(n)
	}
	p := 1
	for n/p >= 100 {
		p *= 10
	}
	return fmt.Sprint((n + p/2) / p * p)
}
