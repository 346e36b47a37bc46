// Package dispatch carries out one tool call: it refuses tools that were not
// offered, repairs and validates the arguments against the tool's own
// schema, sends the call to its resolver (a GraphQL operation over HTTP
// with the turn's scope token, an MCP server, or a runtime built-in),
// retries what is safe to retry, and classifies what came back.
//
// Retries are decided by what the tool does, never by the HTTP verb: a
// call that never reached the backend is always sent again; 429, 502, 503,
// 504 and timeouts are retried only for tools whose effect is read or
// idempotent (the latter with an idempotency key derived from the call).
package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/ent/schema"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/model/retry"
	"github.com/toolgate/toolgate/runtime/repair"
	"github.com/toolgate/toolgate/tools"
)

// Outcome is how a call ended.
type Outcome string

// The outcomes the model hears in distinct words.
const (
	// Hits: it ran and found something.
	Hits Outcome = "HITS"
	// Absence: it ran and matched nothing.
	Absence Outcome = "ABSENCE"
	// Outage: it never ran, after the retries.
	Outage Outcome = "OUTAGE"
	// Refused: not offered, or arguments that do not fit; never sent.
	Refused Outcome = "REFUSED"
	// Error: it ran and failed.
	Error Outcome = "ERROR"
)

// Kind is how a result's content is encoded.
type Kind string

// The kinds of content.
const (
	Text  Kind = "TEXT"
	JSON  Kind = "JSON"
	Media Kind = "MEDIA"
)

// DefaultRetry is the schedule for calls safe to repeat: 4 attempts, waits
// doubling from 250 ms, capped at 4 s (Retry-After honoured up to the cap).
var DefaultRetry = retry.Policy{Attempts: 4, Base: 250 * time.Millisecond, Max: 4 * time.Second, Sleep: retry.Wait}

// Builtin is a tool the runtime carries out itself.
type Builtin func(ctx context.Context, s Scope, args json.RawMessage) (json.RawMessage, error)

// Dispatcher sends calls. Its zero value is not usable: use New.
type Dispatcher struct {
	// URL is the GraphQL endpoint of the API the tools run on.
	URL string
	// HTTP sends the operations; keep-alive matters, so share one.
	HTTP *http.Client
	// Apps calls MCP application tools.
	Apps *mcp.Pool
	// Builtins are the tools the runtime carries out, by name.
	Builtins map[string]Builtin
	// Retry is the schedule for calls safe to repeat; its Sleep waits
	// between attempts (tests make it instant).
	Retry retry.Policy
	// Timeout bounds one attempt.
	Timeout time.Duration

	mu       sync.Mutex
	compiled map[string]*repair.Tool
}

// New returns a dispatcher for the GraphQL endpoint url.
func New(url string, httpClient *http.Client, apps *mcp.Pool) *Dispatcher {
	return &Dispatcher{
		URL:      url,
		HTTP:     httpClient,
		Apps:     apps,
		Builtins: map[string]Builtin{},
		Retry:    DefaultRetry,
		Timeout:  60 * time.Second,
		compiled: map[string]*repair.Tool{},
	}
}

// Scope is what a call may reach: the turn's conversation, with the turn's
// scope token, and the tools it was offered.
type Scope struct {
	TurnID         int
	ConversationID int
	// ConversationRef is the conversation's id as the API shows it, sent as
	// the operation's conversationId; empty sends none.
	ConversationRef string
	Token           string
	Offered         map[string]tools.Definition
	// Apps are the organisation's applications, by name.
	Apps map[string]mcp.Application
}

// Call is one call the model asked for.
type Call struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// Result is what came of a call.
type Result struct {
	Outcome Outcome
	// Attempts is how many times the call was sent (0 when refused).
	Attempts int
	// Arguments are the arguments as repaired and sent.
	Arguments json.RawMessage
	Repairs   []schema.Repair
	Failures  []schema.ItemFailure
	// Evidence are spans of other stored results the call showed the model
	// (read_tool_result windows, exports), lifted from the result's
	// "evidence" field.
	Evidence []schema.Span
	// Content is the whole result (for HITS and ABSENCE).
	Content []byte
	Kind    Kind
	// TruncatedAtSource says the tool itself cut the result (its top-level
	// "truncated" field): what is stored is not all there was.
	TruncatedAtSource bool
	// Message says why the call was refused, failed or never ran.
	Message string
}

// Do carries out one call. It never returns an error: every failure is an
// outcome the model hears.
func (d *Dispatcher) Do(ctx context.Context, s Scope, c Call) Result {
	def, ok := s.Offered[c.Name]
	if !ok {
		return Result{Outcome: Refused, Arguments: c.Arguments, Message: fmt.Sprintf("tool %q is not available", c.Name)}
	}
	tool, err := d.compile(def)
	if err != nil {
		return Result{Outcome: Error, Arguments: c.Arguments, Message: "the tool's schema is broken: " + err.Error()}
	}
	args, repairs, err := tool.Fix(c.Arguments)
	res := Result{Arguments: args, Repairs: toRepairs(repairs)}
	if len(res.Arguments) == 0 {
		res.Arguments = c.Arguments
	}
	if err != nil {
		res.Outcome, res.Message = Refused, err.Error()
		return res
	}
	switch {
	case d.Builtins[c.Name] != nil:
		d.builtin(ctx, s, c, def, &res)
	case def.Family == mcp.Family:
		d.application(ctx, s, c, def, &res)
	case def.Operation != "":
		d.graphql(ctx, s, c, def, &res)
	default:
		res.Outcome, res.Message = Error, "the tool has no way to run"
	}
	if res.Outcome == Hits && absent(def, res) {
		res.Outcome = Absence
	}
	return res
}

func toRepairs(rs []repair.Repair) []schema.Repair {
	out := make([]schema.Repair, len(rs))
	for i, r := range rs {
		out[i] = schema.Repair{Rule: r.Rule.String(), Path: r.Path}
	}
	return out
}

func absent(def tools.Definition, res Result) bool {
	if res.Kind == Media {
		return len(res.Content) == 0
	}
	if res.Kind == Text {
		return strings.TrimSpace(string(res.Content)) == ""
	}
	if def.Absent != nil {
		return def.Absent(res.Content)
	}
	return tools.IsAbsent(res.Content)
}

func (d *Dispatcher) compile(def tools.Definition) (*repair.Tool, error) {
	sum := sha256.Sum256(def.Schema)
	key := def.Name + "\x00" + hex.EncodeToString(sum[:8])
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.compiled[key]; ok {
		return t, nil
	}
	t, err := repair.Compile(def.Name, def.Schema)
	if err != nil {
		return nil, err
	}
	d.compiled[key] = t
	return t, nil
}

// safe reports whether a call may be sent again once it may have reached
// the backend.
func safe(e tools.Effect) bool { return e == tools.EffectRead || e == tools.EffectIdempotent }

// attempt is what one try reported.
type attempt struct {
	// reached: the request may have reached the backend.
	reached bool
	// retryable: a status or failure worth another try (if safe).
	retryable  bool
	retryAfter time.Duration
	err        error
}

// run tries send until it succeeds, fails for good, or the attempts are
// spent, and returns the number of attempts made and the last failure.
func (d *Dispatcher) run(ctx context.Context, effect tools.Effect, send func(context.Context) attempt) (int, attempt) {
	var last attempt
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, d.Timeout)
		last = send(actx)
		cancel()
		if last.err == nil {
			return n, last
		}
		again := !last.reached || (last.retryable && safe(effect))
		if !again || n >= d.Retry.Attempts || ctx.Err() != nil {
			return n, last
		}
		if err := d.Retry.Sleep(ctx, d.Retry.Delay(n-1, last.retryAfter)); err != nil {
			return n, last
		}
	}
}

// IdempotencyKey is the key sent with every attempt of a call, so an
// idempotent backend can recognise a repeat.
func IdempotencyKey(turnID int, callID string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s", turnID, callID)))
	return hex.EncodeToString(sum[:16])
}

func (d *Dispatcher) builtin(ctx context.Context, s Scope, c Call, def tools.Definition, res *Result) {
	out, err := d.Builtins[c.Name](ctx, s, res.Arguments)
	res.Attempts = 1
	if err != nil {
		res.Outcome, res.Message = Error, err.Error()
		return
	}
	res.Outcome = Hits
	res.setJSON(out)
}

// setJSON stores a JSON result: a JSON string is text, anything else JSON.
// Per-item failures are lifted from its "failures" field.
func (res *Result) setJSON(raw json.RawMessage) {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		res.Kind, res.Content = Text, []byte(s)
		return
	}
	res.Kind, res.Content = JSON, raw
	var lifted struct {
		Failures  []schema.ItemFailure `json:"failures"`
		Evidence  []schema.Span        `json:"evidence"`
		Truncated bool                 `json:"truncated"`
	}
	if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &lifted) == nil {
		res.Failures, res.Evidence, res.TruncatedAtSource = lifted.Failures, lifted.Evidence, lifted.Truncated
	}
}

func (d *Dispatcher) application(ctx context.Context, s Scope, c Call, def tools.Definition, res *Result) {
	appName, tool, ok := mcp.SplitToolName(c.Name)
	app, found := s.Apps[appName]
	if !ok || !found {
		res.Outcome, res.Message = Refused, fmt.Sprintf("tool %q is not available", c.Name)
		return
	}
	var out mcp.Result
	n, last := d.run(ctx, def.Effect, func(ctx context.Context) attempt {
		r, err := d.Apps.Call(ctx, app, tool, res.Arguments)
		if err != nil {
			return attempt{reached: !mcp.NeverReached(err), retryable: mcp.MayHaveReached(err), err: err}
		}
		out = r
		return attempt{}
	})
	res.Attempts = n
	switch {
	case last.err != nil && (!last.reached || last.retryable):
		res.Outcome, res.Message = Outage, last.err.Error()
	case last.err != nil:
		res.Outcome, res.Message = Error, last.err.Error()
	case out.IsError:
		res.Outcome, res.Message = Error, strings.TrimSpace(string(out.Content))
	default:
		res.Outcome = Hits
		switch out.Kind {
		case mcp.KindJSON:
			res.setJSON(out.Content)
		case mcp.KindMedia:
			res.Kind, res.Content = Media, out.Content
		default:
			res.Kind, res.Content = Text, out.Content
		}
	}
}

var errStatus = errors.New("unexpected status")
