// Package dispatch carries out one tool call: it refuses tools that were not
// offered, repairs and validates the arguments against the tool's own
// schema, sends the call to its resolver (a GraphQL operation over HTTP
// with the turn's scope token, an MCP server, or a runtime built-in),
// retries what is safe to retry, and classifies what came back. An item
// of the call's item list that does not fit the schema fails alone
// (split.go): the others are sent, unless the tool is all or nothing.
//
// Retries are decided by what the tool does, never by the HTTP verb: a
// call that never reached the backend is always sent again; 429, 502, 503,
// 504 and timeouts are retried only for tools whose effect is read or
// idempotent (the latter with an idempotency key derived from the call).
package dispatch

import (
	"bytes"
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

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/repair"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/tools"
)

// Builtin is a tool the runtime carries out itself.
type Builtin func(ctx context.Context, s Scope, args json.RawMessage) (json.RawMessage, error)

// Dispatcher sends calls. Its zero value is not usable: use New.
type Dispatcher struct {
	// URL is the GraphQL endpoint of the API the tools run on.
	URL string
	// HTTP sends the operations; keep-alive matters, so share one. New
	// traces its requests (trace.go).
	HTTP *http.Client
	// Apps calls MCP application tools.
	Apps *mcp.Pool
	// Client is the unscoped client the tools carried out in process
	// (Definition.Run) are given.
	Client *ent.Client
	// Builtins are tools carried out in process by name, before a
	// definition's Run (tests add their own).
	Builtins map[string]Builtin
	// Retry is the schedule for calls worth another attempt (retry.ByEffect
	// says which); its Sleep waits between attempts (tests make it instant).
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
		HTTP:     traceClient(httpClient),
		Apps:     apps,
		Builtins: map[string]Builtin{},
		Retry:    retry.Default(),
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
	// Deferred names the offered tools the model was sent as stubs and has
	// not read whole yet: their calls are refused, so a tool never runs on
	// arguments guessed from its name, without its description read.
	Deferred map[string]bool
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
	Outcome schematype.Outcome
	// Attempts is how many times the call was sent (0 when refused).
	Attempts int
	// Arguments are the arguments as repaired and sent; the items refused
	// one by one against the schema (listed in Failures as REFUSED) were
	// not sent, the others were.
	Arguments json.RawMessage
	Repairs   []schematype.Repair
	Failures  []schematype.ItemFailure
	// Evidence are spans of other stored results the call showed the model
	// (read_tool_result windows, exports), lifted from the result's
	// "evidence" field.
	Evidence []schematype.Span
	// Content is the whole result (for HITS and ABSENCE).
	Content []byte
	Kind    schematype.ResultKind
	// TruncatedAtSource says the tool itself cut the result (its top-level
	// "truncated" field): what is stored is not all there was.
	TruncatedAtSource bool
	// Message says why the call was refused, failed or never ran.
	Message string
	// Reached says a call that got no answer may have reached its backend.
	Reached bool
}

// Do carries out one call. It never returns an error: every failure is an
// outcome the model hears.
func (d *Dispatcher) Do(ctx context.Context, s Scope, c Call) Result {
	def, res, split, done := d.prepare(s, c)
	if done {
		return res
	}
	// c is the call as sent from here on: repaired, and without the items
	// refused one by one.
	c.Arguments = res.Arguments
	if split != nil {
		c.Arguments = split.Rest
	}
	switch {
	case d.Builtins[c.Name] != nil || def.Run != nil:
		d.builtin(ctx, s, c, def, &res)
	case def.Family == mcp.Family:
		d.application(ctx, s, c, def, &res)
	case def.Operation != "":
		d.graphql(ctx, s, c, def, &res)
	default:
		res.Outcome, res.Message = schematype.OutcomeError, "the tool has no way to run"
	}
	if split != nil {
		res.mergeSplit(split)
	}
	if res.Outcome == schematype.OutcomeHits && absent(def, res) {
		res.Outcome = settle(res.Failures, itemCount(res.Arguments))
	}
	for i := range res.Failures {
		res.Failures[i].Kind = res.Failures[i].Kind.Or()
	}
	return res
}

// Prepare checks and repairs a call as Do does before sending it, and
// sends nothing: the arguments a person approves are exactly those Do
// would send. It reports false, with the outcome set, for a call Do would
// refuse without sending.
func (d *Dispatcher) Prepare(s Scope, c Call) (Result, bool) {
	_, res, _, done := d.prepare(s, c)
	return res, !done
}

// prepare is the part of Do before anything is sent: done, with the
// outcome set, for a call refused or broken; else the repaired arguments,
// and the items refused one by one (split) when the tool takes them.
func (d *Dispatcher) prepare(s Scope, c Call) (tools.Definition, Result, *repair.Split, bool) {
	def, ok := s.Offered[c.Name]
	if !ok {
		return def, Result{Outcome: schematype.OutcomeRefused, Arguments: c.Arguments, Message: fmt.Sprintf("tool %q is not available", c.Name)}, nil, true
	}
	if s.Deferred[c.Name] {
		return def, Result{Outcome: schematype.OutcomeRefused, Arguments: c.Arguments,
			Message: fmt.Sprintf("tool %q is listed in brief: read its definition with %s first", c.Name, tools.SchemaTool)}, nil, true
	}
	tool, err := d.compile(def)
	if err != nil {
		return def, Result{Outcome: schematype.OutcomeError, Arguments: c.Arguments, Message: "the tool's schema is broken: " + err.Error()}, nil, true
	}
	args, repairs, err := tool.Fix(c.Arguments)
	res := Result{Arguments: args, Repairs: toRepairs(repairs)}
	if len(res.Arguments) == 0 {
		res.Arguments = c.Arguments
	}
	if err != nil {
		var argErr *repair.ArgumentError
		if !errors.As(err, &argErr) || argErr.Split == nil || def.Atomic {
			res.Outcome, res.Message = schematype.OutcomeRefused, err.Error()
			return def, res, nil, true
		}
		return def, res, argErr.Split, false
	}
	return def, res, nil, false
}

// settle decides the outcome of a call that gave no hits by what its items
// say: every item never ran is an outage, every item refused a refusal,
// every item failed or refused an error; any item that ran and matched
// nothing (one named ABSENCE, or one of the call's items not listed among
// the failures) makes it an absence. The items are told apart one by one.
func settle(fs []schematype.ItemFailure, items int) schematype.Outcome {
	n := map[schematype.FailureKind]int{}
	listed := map[int]bool{}
	for _, f := range fs {
		n[f.Kind.Or()]++
		listed[f.Item] = true
	}
	switch {
	case len(fs) == 0 || n[schematype.FailureAbsence] > 0 || len(listed) < items:
		return schematype.OutcomeAbsence
	case n[schematype.FailureOutage] == len(fs):
		return schematype.OutcomeOutage
	case n[schematype.FailureRefused] == len(fs):
		return schematype.OutcomeRefused
	case n[schematype.FailureOutage] == 0:
		return schematype.OutcomeError
	default:
		// Some never ran, others failed: the outage is what to act on.
		return schematype.OutcomeOutage
	}
}

// itemCount is the number of items of a many-item call: the length of its
// longest list argument (queries, refs, files), 1 for a call with none.
func itemCount(args json.RawMessage) int {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return 1
	}
	n := 1
	for _, v := range m {
		var list []json.RawMessage
		if len(v) > 0 && v[0] == '[' && json.Unmarshal(v, &list) == nil {
			n = max(n, len(list))
		}
	}
	return n
}

func toRepairs(rs []repair.Repair) []schematype.Repair {
	out := make([]schematype.Repair, len(rs))
	for i, r := range rs {
		out[i] = schematype.Repair{Rule: r.Rule.String(), Path: r.Path}
	}
	return out
}

func absent(def tools.Definition, res Result) bool {
	if res.Kind == schematype.KindMedia {
		return len(res.Content) == 0
	}
	if res.Kind == schematype.KindText {
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

// run tries send, each attempt bounded by the dispatcher's timeout, as the
// one retry loop and the per-effect rule decide. It returns the number of
// attempts made and the last attempt's failure, if any.
func (d *Dispatcher) run(ctx context.Context, effect tools.Effect, send func(context.Context) error) (int, error) {
	n, err := retry.Do(ctx, d.Retry, retry.ByEffect(effect), func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, d.Timeout)
		defer cancel()
		return send(actx)
	})
	var exhausted *retry.ExhaustedError
	if errors.As(err, &exhausted) {
		// The attempts are told apart; the last failure is what happened.
		err = exhausted.Err
	}
	return n, err
}

// failed records a call whose last attempt got no usable answer: an outage
// when it never reached the backend, or when its trouble tends to pass and
// the call changes nothing (a read, or a write whose backend answered that
// it failed, having rolled back); "may have run" when a write may have
// reached the backend and no answer came back; an error when the backend
// answered for good.
func (res *Result) failed(err error, effect tools.Effect) {
	var f *retry.Failure
	switch {
	case !errors.As(err, &f) || !f.Reached:
		res.Outcome, res.Message = schematype.OutcomeOutage, err.Error()
	case f.Transient && !f.Answered && effect == tools.EffectWrite:
		res.Outcome, res.Message, res.Reached = schematype.OutcomeMayHaveRun, err.Error(), true
	case f.Transient:
		res.Outcome, res.Message, res.Reached = schematype.OutcomeOutage, err.Error(), true
	default:
		res.Outcome, res.Message = schematype.OutcomeError, err.Error()
	}
}

// IdempotencyKey is the key sent with every attempt of a call, so an
// idempotent backend can recognise a repeat.
func IdempotencyKey(turnID int, callID string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d\x00%s", turnID, callID)))
	return hex.EncodeToString(sum[:16])
}

func (d *Dispatcher) builtin(ctx context.Context, s Scope, c Call, def tools.Definition, res *Result) {
	var (
		out json.RawMessage
		err error
	)
	if run := d.Builtins[c.Name]; run != nil {
		out, err = run(ctx, s, c.Arguments)
	} else {
		out, err = def.Run(ctx, d.Client, s.ConversationID, c.Arguments)
	}
	res.Attempts = 1
	var refusal *tools.Refusal
	switch {
	case errors.As(err, &refusal):
		res.Outcome, res.Message = schematype.OutcomeRefused, err.Error()
		return
	case err != nil:
		res.Outcome, res.Message = schematype.OutcomeError, err.Error()
		return
	}
	res.Outcome = schematype.OutcomeHits
	res.setJSON(out)
}

// setJSON stores a JSON result: a JSON string is text, anything else JSON.
// Per-item failures are lifted from its "failures" field.
func (res *Result) setJSON(raw json.RawMessage) {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		res.setText([]byte(s))
		return
	}
	res.Kind, res.Content = schematype.KindJSON, raw
	var lifted struct {
		Failures  []schematype.ItemFailure `json:"failures"`
		Evidence  []schematype.Span        `json:"evidence"`
		Truncated bool                     `json:"truncated"`
	}
	if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &lifted) == nil {
		res.Failures, res.Evidence, res.TruncatedAtSource = lifted.Failures, lifted.Evidence, lifted.Truncated
	}
}

// setText stores a text result. Text that is a JSON object or array (an
// MCP tool answering JSON as text, say) is stored and previewed as JSON, so
// the model sees its structure rather than JSON escaped inside a string.
func (res *Result) setText(text []byte) {
	t := bytes.TrimSpace(text)
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
		res.setJSON(t)
		return
	}
	res.Kind, res.Content = schematype.KindText, text
}

func (d *Dispatcher) application(ctx context.Context, s Scope, c Call, def tools.Definition, res *Result) {
	appName, tool, ok := mcp.SplitToolName(c.Name)
	app, found := s.Apps[appName]
	if !ok || !found {
		res.Outcome, res.Message = schematype.OutcomeRefused, fmt.Sprintf("tool %q is not available", c.Name)
		return
	}
	var out mcp.Result
	n, err := d.run(ctx, def.Effect, func(ctx context.Context) error {
		r, err := d.Apps.Call(ctx, app, tool, c.Arguments)
		switch {
		case err == nil:
			out = r
			return nil
		case mcp.SessionGone(err):
			return retry.Reconnect(err)
		case mcp.NeverReached(err):
			return retry.NeverReached(err)
		default:
			return retry.Reached(err, mcp.MayHaveReached(err), 0)
		}
	})
	res.Attempts = n
	switch {
	case err != nil:
		res.failed(err, def.Effect)
	case out.IsError:
		res.Outcome, res.Message = schematype.OutcomeError, strings.TrimSpace(string(out.Content))
	default:
		res.Outcome = schematype.OutcomeHits
		switch out.Kind {
		case schematype.KindJSON:
			res.setJSON(out.Content)
		case schematype.KindText:
			res.setText(out.Content)
		default:
			res.Kind, res.Content = out.Kind, out.Content
		}
	}
}

var errStatus = errors.New("unexpected status")
