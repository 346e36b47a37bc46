// Package replay is a model provider that answers from a script instead of a
// model. It is the default when no provider key is configured, so the
// service runs offline and its demo conversation is real runtime output:
// the tools the script calls really run. Replayed answers say so: the
// provider's Name and every Response's Model are "replay". Their usage is an
// estimate: the request and the answer counted in o200k tokens (the stable
// prefix read from cache after a conversation's first call, as a provider's
// prompt cache would), which the price table prices at a list price, so the
// cost view of a demo shows what a real provider would bill.
//
// # Script format
//
// A script is a JSON object with a list of entries. Each entry is chosen by
// a case-insensitive substring of the latest user message ("match"); the
// first entry that matches wins, and the entry with an empty match is the
// default for messages no other entry matches. An entry is a list of steps,
// played in order within one user message: the first call after the user
// speaks plays step 0, and each call after that (once the tool results of
// the previous step are in) plays the next step. A step may think, speak,
// and ask for tool calls; a step without tool calls ends the turn.
//
//	{
//	  "entries": [
//	    {"match": "thank", "steps": [{"text": "You're welcome."}]},
//	    {"match": "", "steps": [
//	      {"thinking": "Use the calculator.", "text": "Let me work that out.",
//	       "toolCalls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
//	      {"text": "It is 42."}
//	    ]}
//	  ]
//	}
//
// The step is found from the history alone (assistant messages since the
// latest user message), so the provider keeps no state and any number of
// conversations can replay at once. Past the last step, and when nothing
// matches and there is no default, it answers with a short note instead of
// failing the turn.
package replay

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/runtime/model"
)

// Name is the provider's configuration name.
const Name = "replay"

// ModelName is the model every replayed Response names, which is how a
// replayed turn is told from a real one.
const ModelName = "replay"

// StopReason is every replayed Response's stop reason.
const StopReason = "replay"

// The notes answered when the script has nothing to play.
const (
	NoEntryText = "This replay script has no answer for that message."
	NoStepText  = "This replay script has no more steps for that message."
)

// Script is a replay script: entries tried in order.
type Script struct {
	Entries []Entry `json:"entries"`
}

// Entry is the scripted answer to user messages that contain Match.
type Entry struct {
	// Match is a case-insensitive substring of the latest user message;
	// empty makes the entry the default.
	Match string `json:"match"`
	Steps []Step `json:"steps"`
}

// Step is one scripted model answer.
type Step struct {
	Thinking  string     `json:"thinking,omitempty"`
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
}

// ToolCall is a scripted call: a tool name and a JSON object of arguments.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Provider plays a script. It keeps no state, so it is safe for concurrent use.
type Provider struct {
	entries []Entry
	// fallback is the default entry's index, or -1.
	fallback int
	// pace is the wait between streamed pieces of PieceChars characters.
	pace time.Duration
}

// PieceChars is how many characters of a step's text each streamed piece
// holds.
const PieceChars = 12

// ThinkPaces is how many paces a replayed call waits before its first
// piece, as a model takes a moment before it writes: 300 ms at the default
// pace, long enough to see a turn running and to subscribe to it.
const ThinkPaces = 20

// DefaultPace is the wait between pieces `toolgate serve` plays by
// default: a 2,000-character answer streams in about two and a half
// seconds, as a model would write it.
const DefaultPace = 15 * time.Millisecond

// Paced returns p streaming its text (to a request's Stream) one piece
// every pace; 0, the default, streams the pieces at once.
func (p *Provider) Paced(pace time.Duration) *Provider {
	cp := *p
	cp.pace = max(pace, 0)
	return &cp
}

var _ model.Provider = (*Provider)(nil)

// New checks a script and returns a provider that plays it.
func New(script Script) (*Provider, error) {
	if len(script.Entries) == 0 {
		return nil, errors.New("replay script: no entries")
	}
	p := &Provider{fallback: -1}
	for i, e := range script.Entries {
		e.Match = strings.ToLower(strings.TrimSpace(e.Match))
		if e.Match == "" {
			if p.fallback >= 0 {
				return nil, fmt.Errorf("replay script: entries %d and %d are both the default", p.fallback, i)
			}
			p.fallback = i
		}
		if len(e.Steps) == 0 {
			return nil, fmt.Errorf("replay script: entry %d: no steps", i)
		}
		steps := make([]Step, len(e.Steps))
		for j, s := range e.Steps {
			checked, err := checkStep(s)
			if err != nil {
				return nil, fmt.Errorf("replay script: entry %d, step %d: %w", i, j, err)
			}
			steps[j] = checked
		}
		e.Steps = steps
		p.entries = append(p.entries, e)
	}
	return p, nil
}

// checkStep validates a step and compacts its arguments.
func checkStep(s Step) (Step, error) {
	if s.Text == "" && len(s.ToolCalls) == 0 {
		return s, errors.New("a step needs text or tool calls")
	}
	calls := make([]ToolCall, len(s.ToolCalls))
	for k, c := range s.ToolCalls {
		if c.Name == "" {
			return s, fmt.Errorf("tool call %d: no name", k)
		}
		args := bytes.TrimSpace(c.Arguments)
		if len(args) == 0 {
			args = []byte("{}")
		}
		var buf bytes.Buffer
		if args[0] != '{' || json.Compact(&buf, args) != nil {
			return s, fmt.Errorf("tool call %d (%s): arguments must be a JSON object", k, c.Name)
		}
		calls[k] = ToolCall{Name: c.Name, Arguments: buf.Bytes()}
	}
	s.ToolCalls = calls
	return s, nil
}

// Load reads a script file and returns a provider that plays it.
func Load(path string) (*Provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read replay script: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("replay script %s: %w", path, err)
	}
	return p, nil
}

// Parse reads a script and returns a provider that plays it. Unknown
// fields are refused, so a misspelt key does not silently do nothing.
func Parse(data []byte) (*Provider, error) {
	var script Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&script); err != nil {
		return nil, err
	}
	return New(script)
}

// demo is the script `make run` plays when no provider key is set.
//
//go:embed demo.json
var demo []byte

// Demo returns a provider playing the built-in demo script.
func Demo() (*Provider, error) {
	return Parse(demo)
}

// Name returns "replay".
func (p *Provider) Name() string { return Name }

// Complete plays the step the history has reached.
func (p *Provider) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	out := &model.Response{Model: ModelName, StopReason: StopReason}
	if req.Kind == model.KindSummary {
		out.Text = summary(req.Messages)
		out.Usage = estimate(req, out)
		return out, nil
	}
	latest, step := position(req.Messages)
	e := p.entry(latest)
	switch {
	case e == nil:
		out.Text = NoEntryText
	case step >= len(e.Steps):
		out.Text = NoStepText
	default:
		s := e.Steps[step]
		out.Thinking, out.Text = s.Thinking, s.Text
		for _, c := range s.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, model.ToolCall{
				ID:        callID(),
				Name:      c.Name,
				Arguments: bytes.Clone(c.Arguments),
			})
		}
	}
	out.Usage = estimate(req, out)
	if err := p.play(ctx, req.Stream, out); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return out, nil
}

// messageTokens is what a chat format adds to each message (its role and
// delimiters), as OpenAI's own counting guide puts it.
const messageTokens = 4

// estimate counts a replayed call as a provider would bill it, in o200k
// tokens: the system prompt and tool definitions (the stable prefix, read
// from cache once the conversation has had an answer), the messages, and
// the answer's thinking, text and tool calls.
func estimate(req model.Request, out *model.Response) model.Usage {
	prefix := int64(token.Stable(req.System))
	for _, t := range req.Tools {
		prefix += int64(token.Stable(t.Name + "\n" + t.Description + "\n" + string(t.Schema)))
	}
	var rest int64
	answered := false
	for _, m := range req.Messages {
		answered = answered || m.Role == model.RoleAssistant
		rest += messageTokens + int64(token.Count(m.Text))
		for _, c := range m.ToolCalls {
			rest += int64(token.Count(c.Name + string(c.Arguments)))
		}
	}
	u := model.Usage{InputUncached: rest, Output: int64(token.Count(out.Thinking) + token.Count(out.Text))}
	for _, c := range out.ToolCalls {
		u.Output += int64(token.Count(c.Name + string(c.Arguments)))
	}
	if answered {
		u.CacheRead = prefix
	} else {
		u.InputUncached += prefix
	}
	return u
}

// play streams an answer as a model would: its text in pieces, then each
// tool call, at the provider's pace; a cancelled context stops it.
func (p *Provider) play(ctx context.Context, s model.Stream, out *model.Response) error {
	if s == nil {
		return nil
	}
	var timer *time.Timer
	wait := func() error {
		if p.pace <= 0 {
			return ctx.Err()
		}
		if timer == nil {
			timer = time.NewTimer(p.pace)
		} else {
			timer.Reset(p.pace)
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
			return nil
		}
	}
	for range ThinkPaces {
		if err := wait(); err != nil {
			return err
		}
	}
	text := out.Text
	for text != "" {
		n, i := 0, 0
		for i < len(text) && n < PieceChars {
			_, size := utf8.DecodeRuneInString(text[i:])
			i += size
			n++
		}
		s.Text(text[:i])
		text = text[i:]
		if err := wait(); err != nil {
			return err
		}
	}
	for i, c := range out.ToolCalls {
		s.ToolCall(i, c.Name)
		s.ToolArguments(i, utf8.RuneCount(c.Arguments))
		if err := wait(); err != nil {
			return err
		}
	}
	return nil
}

// SummaryChars bounds a replayed summary.
const SummaryChars = 1500

// summary answers a compaction request without a model: a line saying so,
// then the start of each thing the person wrote in the turns to summarise
// (their "user: " lines), so compaction works offline and its summaries
// still say something true.
func summary(history []model.Message) string {
	var b strings.Builder
	b.WriteString("Replayed summary (no model wrote it). The person wrote:")
	if len(history) == 0 {
		return b.String()
	}
	for line := range strings.Lines(history[len(history)-1].Text) {
		text, ok := strings.CutPrefix(strings.TrimSpace(line), "user: ")
		if !ok {
			continue
		}
		if r := []rune(text); len(r) > 80 {
			text = string(r[:80]) + "…"
		}
		if b.Len()+len(text) > SummaryChars {
			b.WriteString("\n- …")
			break
		}
		b.WriteString("\n- " + text)
	}
	return b.String()
}

// position finds the latest user message and how many answers the model
// has given since, which is the step to play.
func position(history []model.Message) (string, int) {
	step := 0
	for i := len(history) - 1; i >= 0; i-- {
		switch history[i].Role {
		case model.RoleUser:
			return history[i].Text, step
		case model.RoleAssistant:
			step++
		}
	}
	return "", step
}

// entry picks the first entry the text matches, else the default.
func (p *Provider) entry(text string) *Entry {
	text = strings.ToLower(text)
	for i := range p.entries {
		if m := p.entries[i].Match; m != "" && strings.Contains(text, m) {
			return &p.entries[i]
		}
	}
	if p.fallback >= 0 {
		return &p.entries[p.fallback]
	}
	return nil
}

// callID names a replayed call. It is random because the runtime keys
// results, and idempotency, by call id across conversations.
func callID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "call_replay_" + hex.EncodeToString(b)
}
