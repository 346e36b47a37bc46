// Package model is the small interface the turn loop uses to talk to a
// language model, and the types that cross it. Providers live in the
// packages below it.
package model

import (
	"context"
	"encoding/json"
	"strings"
)

// Role is who a message is from.
type Role string

// The roles of a conversation with a model.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolSpec is a tool definition as the provider receives it.
type ToolSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// Message is one entry of the history sent to the model.
type Message struct {
	Role Role
	// Text is the user text, the assistant's answer, or the tool result.
	Text string
	// ToolCalls are set on assistant messages that asked for tools.
	ToolCalls []ToolCall
	// ToolCallID and ToolName are set on tool messages.
	ToolCallID string
	ToolName   string
	// IsError marks a tool message that reports a failure.
	IsError bool
	// Images are set on a tool message whose result is non-text media (an
	// inspection's page images), when the model takes images; Text then
	// says what they are and the ref they are stored under.
	Images []Image
}

// Image is one image a tool message carries.
type Image struct {
	// MediaType is image/jpeg, image/png, image/gif or image/webp.
	MediaType string
	Data      []byte
}

// ImageTaker is a provider that can show images to some models.
type ImageTaker interface {
	// TakesImages reports whether the model named (empty: the provider's
	// default) reads images.
	TakesImages(model string) bool
}

// TakesImages reports whether p sends images to the model named: only a
// provider that says so does. Any other hears of an image by its text
// alone (the summary and the ref).
func TakesImages(p Provider, model string) bool {
	t, ok := p.(ImageTaker)
	return ok && t.TakesImages(model)
}

// Request is one model call. System and Tools are the stable prefix: they
// must serialise to the same bytes on every call of the same agent, so
// providers can cache them.
type Request struct {
	Model     string
	System    string
	Tools     []ToolSpec
	Messages  []Message
	MaxTokens int
	// Kind says why the call is made; the zero value is a turn's own step.
	Kind Kind
	// Attribution is who pays. Providers send it as request metadata; it
	// never enters a message the model reads.
	Attribution Attribution
	// Stream, when set, hears the answer as the provider reads it; nil
	// streams nothing. It never changes what Complete returns.
	Stream Stream
}

// Stream hears a model's answer while it arrives: the text in pieces, and
// each tool call as the model begins writing it. Thinking is never told.
// Its methods must not block: they run on the provider's read of the
// answer.
type Stream interface {
	// Text is the next piece of the answer's text.
	Text(piece string)
	// ToolCall: the model began writing call index (from 0), to name.
	ToolCall(index int, name string)
	// ToolArguments: call index's arguments have reached chars characters.
	ToolArguments(index, chars int)
	// Restart: the call is being made again (a retry), and what was told
	// of it is void.
	Restart()
}

// Attempts tells s of each attempt at one call: from the second on it
// restarts s, so a retried call never reads as two answers glued together.
// Every method is safe on a nil s, and on a nil *Attempts.
type Attempts struct {
	s     Stream
	tried bool
}

// StreamTo returns the Attempts of a call streaming to s (nil: nowhere).
func StreamTo(s Stream) *Attempts { return &Attempts{s: s} }

// Attempt starts an attempt.
func (a *Attempts) Attempt() {
	if a == nil || a.s == nil {
		return
	}
	if a.tried {
		a.s.Restart()
	}
	a.tried = true
}

// Text tells a piece of text.
func (a *Attempts) Text(piece string) {
	if a != nil && a.s != nil && piece != "" {
		a.s.Text(piece)
	}
}

// ToolCall tells the start of a tool call.
func (a *Attempts) ToolCall(index int, name string) {
	if a != nil && a.s != nil {
		a.s.ToolCall(index, name)
	}
}

// ToolArguments tells a tool call's arguments' progress.
func (a *Attempts) ToolArguments(index, chars int) {
	if a != nil && a.s != nil {
		a.s.ToolArguments(index, chars)
	}
}

// Kind is why a model call is made.
type Kind string

// The kinds of model call.
const (
	// KindStep is one of a turn's own calls.
	KindStep Kind = ""
	// KindSummary asks for a summary of earlier turns (compaction). The
	// replay provider answers it with a summary of its own, so compaction
	// works offline.
	KindSummary Kind = "summary"
)

// Attribution is who pays for a call, as opaque ids (never names): the
// organisation, the user, the agent and the conversation.
type Attribution struct {
	Organization, User, Agent, Conversation string
}

// Key is the attribution as one opaque string, the form providers that
// take a single identifier receive and the form recorded on each call;
// empty when there is no attribution.
func (a Attribution) Key() string {
	if a == (Attribution{}) {
		return ""
	}
	var b strings.Builder
	for i, kv := range [][2]string{{"o", a.Organization}, {"u", a.User}, {"a", a.Agent}, {"c", a.Conversation}} {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(kv[0] + "=" + kv[1])
	}
	return b.String()
}

// Usage is what the provider reports for one call. InputUncached excludes
// cache reads and cache writes.
type Usage struct {
	InputUncached int64
	CacheRead     int64
	CacheWrite    int64
	Output        int64
}

// Response is the model's answer to one call.
type Response struct {
	// Model is the model the provider says answered.
	Model     string
	Text      string
	Thinking  string
	ToolCalls []ToolCall
	Usage     Usage
	// StopReason is the provider's own word for why it stopped.
	StopReason string
}

// Provider sends a request to a model and returns its answer. Implementations
// retry 429 and 5xx answers themselves, with doubling waits, and return an
// error only when the call failed for good.
type Provider interface {
	// Name is the provider's configuration name: "openai", "anthropic", "replay".
	Name() string
	Complete(ctx context.Context, req Request) (*Response, error)
}
