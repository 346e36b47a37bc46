package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/tools"
)

// sessionIDHeader carries the session a Streamable HTTP request belongs to.
const sessionIDHeader = "Mcp-Session-Id"

// rejectedCode is the SDK's JSON-RPC code for a request its transport
// turned back (HTTP 429, 5xx, a failed send); an error carrying it is the
// transport's, not the server's answer.
const rejectedCode = -32005

// defaultSchema stands in for a tool that declares no input schema.
var defaultSchema = json.RawMessage(`{"type":"object"}`)

// Pool keeps one MCP client session per application URL, connected on first
// use, and the tools each session listed. A session that fails is dropped and
// a new one connected on the next use. It is safe for concurrent use.
type Pool struct {
	httpClient *http.Client
	client     *sdk.Client

	mu      sync.Mutex
	entries map[string]*entry
	closed  bool
	// closing tracks sessions dropped in the background, so Close can wait
	// for them.
	closing sync.WaitGroup
}

// entry is one URL's slot.
type entry struct {
	// sem lets one caller at a time connect or list tools for the URL, and
	// lets the others give up when their context ends.
	sem chan struct{}

	mu  sync.Mutex // guards cur and the listing of cur
	cur *session
}

type session struct {
	cs     *sdk.ClientSession
	listed bool
	tools  map[string]*sdk.Tool
}

// NewPool returns a pool whose sessions use httpClient (http.DefaultClient
// when nil). Callers bound each request with the context they pass; the
// client needs no overall timeout.
func NewPool(httpClient *http.Client) *Pool {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	c := *httpClient
	c.Transport = recordingTransport{base: httpClient.Transport}
	return &Pool{
		httpClient: &c,
		client:     sdk.NewClient(&sdk.Implementation{Name: "toolgate", Version: "1"}, nil),
		entries:    make(map[string]*entry),
	}
}

// Listing is what an application offers: the definitions of its allowed
// tools that the server lists, and the allowed tools it does not list.
type Listing struct {
	Definitions []tools.Definition
	Missing     []string
}

// Tools returns the definitions of the application's allowed tools that its
// server lists, in allowlist order.
func (p *Pool) Tools(ctx context.Context, app Application) ([]tools.Definition, error) {
	l, err := p.List(ctx, app)
	return l.Definitions, err
}

// List returns what the application offers. The server is asked for its
// tools once per session; an application that allows nothing is not
// contacted.
func (p *Pool) List(ctx context.Context, app Application) (Listing, error) {
	if err := app.Validate(); err != nil {
		return Listing{}, fmt.Errorf("list tools: %w", err)
	}
	if len(app.AllowedTools) == 0 {
		return Listing{}, nil
	}
	var listed map[string]*sdk.Tool
	err := p.do(ctx, app.URL, func(ctx context.Context, e *entry, s *session) error {
		var err error
		listed, err = p.listTools(ctx, e, s)
		return err
	})
	if err != nil {
		return Listing{}, fmt.Errorf("list tools of %s: %w", app.Name, err)
	}
	var l Listing
	for _, name := range app.AllowedTools {
		t, ok := listed[name]
		if !ok {
			l.Missing = append(l.Missing, name)
			continue
		}
		d, err := definition(app.Name, t)
		if err != nil {
			return Listing{}, fmt.Errorf("list tools of %s: %w", app.Name, err)
		}
		l.Definitions = append(l.Definitions, d)
	}
	return l, nil
}

// Call calls tool, a server-side name on the application's allowlist, with
// args, a JSON object. A tool that reports a failure gives a Result with
// IsError; an error is a failure to get an answer, and NeverReached and
// MayHaveReached tell whether it may be retried.
func (p *Pool) Call(ctx context.Context, app Application, tool string, args json.RawMessage) (Result, error) {
	if err := app.Validate(); err != nil {
		return Result{}, fmt.Errorf("call tool: %w", err)
	}
	if !app.Allows(tool) {
		return Result{}, fmt.Errorf("call %s%s%s: %w", app.Name, Separator, tool, ErrNotAllowed)
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if !json.Valid(args) {
		return Result{}, fmt.Errorf("call %s%s%s: arguments are not JSON", app.Name, Separator, tool)
	}
	ctx, span := startCall(ctx, app, tool)
	r, err := p.call(ctx, app, tool, args)
	endCall(span, r, err)
	return r, err
}

// call sends the call on the application's session.
func (p *Pool) call(ctx context.Context, app Application, tool string, args json.RawMessage) (Result, error) {
	var res *sdk.CallToolResult
	// One attempt: the call's retry policy, the dispatcher's, is the one
	// that sends it again, on a new session when this one was gone.
	err := p.once(ctx, app.URL, func(ctx context.Context, _ *entry, s *session) error {
		var err error
		res, err = s.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("call %s%s%s: %w", app.Name, Separator, tool, err)
	}
	r, err := convert(res)
	if err != nil {
		return Result{}, fmt.Errorf("call %s%s%s: %w", app.Name, Separator, tool, err)
	}
	return r, nil
}

// Close closes every session and waits for sessions being dropped. Closing
// is best effort: a server that is down forgets its sessions on its own.
// Calls after Close fail with ErrClosed.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	var open []*session
	for _, e := range p.entries {
		e.mu.Lock()
		if e.cur != nil {
			open = append(open, e.cur)
			e.cur = nil
		}
		e.mu.Unlock()
	}
	p.mu.Unlock()

	for _, s := range open {
		p.closing.Go(func() { _ = s.cs.Close() })
	}
	p.closing.Wait()
}

// reconnect is the pool's retry for its own listing: a session the server
// no longer knows ran nothing, so the request is sent once more, at once,
// on a new session. A call is not retried here: its policy is the caller's.
var reconnect = retry.Policy{Attempts: 2, Sleep: retry.NoWait}

// errSessionGone marks a request the server turned back because it no
// longer knew the session.
var errSessionGone = errors.New("session gone")

// SessionGone reports whether err says the server turned the request back
// because it no longer knew the session: nothing ran, and the pool has
// dropped the session, so the next attempt goes at once on a new one.
func SessionGone(err error) bool { return errors.Is(err, errSessionGone) }

// do runs op on the URL's session, connecting one if needed.
func (p *Pool) do(ctx context.Context, url string, op func(context.Context, *entry, *session) error) error {
	gone := func(err error) retry.Verdict { return retry.Verdict{Retry: SessionGone(err)} }
	_, err := retry.Do(ctx, reconnect, gone, func(ctx context.Context) error {
		return p.once(ctx, url, op)
	})
	var exhausted *retry.ExhaustedError
	if errors.As(err, &exhausted) {
		err = exhausted.Err
	}
	return err
}

// once is one attempt of do.
func (p *Pool) once(ctx context.Context, url string, op func(context.Context, *entry, *session) error) error {
	e, s, err := p.session(ctx, url)
	if errors.Is(err, ErrClosed) {
		return err
	}
	if err != nil {
		// Whatever broke the handshake, op's request was never sent.
		return fmt.Errorf("connect: %w: %w", ErrNeverReached, err)
	}
	rec := &recorder{}
	err = op(context.WithValue(ctx, recorderKey{}, rec), e, s)
	if err == nil {
		return nil
	}
	gone := errors.Is(err, sdk.ErrSessionMissing) || rec.sessionGone.Load()
	answered := !gone && serverAnswered(err)
	// A caller that gave up says nothing about the session.
	if !answered && ctx.Err() == nil {
		p.drop(e, s)
	}
	switch {
	case gone:
		return fmt.Errorf("%w: %w: %w", ErrNeverReached, errSessionGone, err)
	case answered:
		return err
	case neverSent(err):
		return fmt.Errorf("%w: %w", ErrNeverReached, err)
	default:
		return fmt.Errorf("%w: %w", ErrMayHaveReached, err)
	}
}

// session returns the URL's session, connecting one if there is none.
func (p *Pool) session(ctx context.Context, url string) (*entry, *session, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, ErrClosed
	}
	e := p.entries[url]
	if e == nil {
		e = &entry{sem: make(chan struct{}, 1)}
		p.entries[url] = e
	}
	p.mu.Unlock()

	if s := e.current(); s != nil {
		return e, s, nil
	}
	if err := e.acquire(ctx); err != nil {
		return nil, nil, err
	}
	defer e.release()
	// Another caller may have connected while this one waited.
	if s := e.current(); s != nil {
		return e, s, nil
	}
	cs, err := p.client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: p.httpClient,
		// Only answers to our own requests matter, and a standing stream
		// per server would be one more thing to break and reconnect.
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	s := &session{cs: cs}

	p.mu.Lock()
	closed := p.closed
	if !closed {
		e.mu.Lock()
		e.cur = s
		e.mu.Unlock()
	}
	p.mu.Unlock()
	if closed {
		_ = cs.Close()
		return nil, nil, ErrClosed
	}
	return e, s, nil
}

// listTools returns the session's tools by name, asking the server the first
// time only.
func (p *Pool) listTools(ctx context.Context, e *entry, s *session) (map[string]*sdk.Tool, error) {
	if t, ok := e.listing(s); ok {
		return t, nil
	}
	if err := e.acquire(ctx); err != nil {
		return nil, err
	}
	defer e.release()
	if t, ok := e.listing(s); ok {
		return t, nil
	}
	listed := make(map[string]*sdk.Tool)
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		listed[t.Name] = t
	}
	e.mu.Lock()
	s.tools, s.listed = listed, true
	e.mu.Unlock()
	return listed, nil
}

// drop forgets s if it is still the entry's session and closes it in the
// background: closing sends a request that a failing server may hold up.
func (p *Pool) drop(e *entry, s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.mu.Lock()
	current := e.cur == s
	if current {
		e.cur = nil
	}
	e.mu.Unlock()
	if current {
		p.closing.Go(func() { _ = s.cs.Close() })
	}
}

func (e *entry) current() *session {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

func (e *entry) listing(s *session) (map[string]*sdk.Tool, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return s.tools, s.listed
}

func (e *entry) acquire(ctx context.Context) error {
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *entry) release() { <-e.sem }

type recorderKey struct{}

// recorder notes, for one request, what the SDK's errors may not say.
type recorder struct {
	// sessionGone is set by an HTTP 404 to a request naming a session: the
	// server ended the session and ran nothing. Some servers put a JSON-RPC
	// error in that answer, which the SDK then reports instead of
	// ErrSessionMissing.
	sessionGone atomic.Bool
}

// recordingTransport feeds the recorder in a request's context.
type recordingTransport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(withTraceParent(req))
	if err == nil && resp.StatusCode == http.StatusNotFound && req.Header.Get(sessionIDHeader) != "" {
		if rec, ok := req.Context().Value(recorderKey{}).(*recorder); ok {
			rec.sessionGone.Store(true)
		}
	}
	return resp, err
}

// serverAnswered reports whether err is the server's own JSON-RPC error (an
// unknown tool, bad arguments): the session is sound and a retry would get
// the same answer.
func serverAnswered(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) &&
		!errors.Is(err, &jsonrpc.Error{Code: rejectedCode}) &&
		!errors.Is(err, sdk.ErrSessionMissing)
}

// neverSent reports whether err proves the request ran nowhere: no
// connection could be made, or the server refused the session before
// reading the call.
func neverSent(err error) bool {
	if errors.Is(err, sdk.ErrSessionMissing) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// definition turns a listed tool into the runtime's definition.
func definition(app string, t *sdk.Tool) (tools.Definition, error) {
	name, err := ToolName(app, t.Name)
	if err != nil {
		return tools.Definition{}, err
	}
	schema := defaultSchema
	if t.InputSchema != nil {
		schema, err = json.Marshal(t.InputSchema)
		if err != nil {
			return tools.Definition{}, fmt.Errorf("tool %s: marshal input schema: %w", t.Name, err)
		}
	}
	desc := t.Description
	if strings.TrimSpace(desc) == "" {
		desc = t.Title
		if desc == "" && t.Annotations != nil {
			desc = t.Annotations.Title
		}
	}
	return tools.Definition{
		Name:        name,
		Family:      Family,
		Description: trimDescription(desc),
		Schema:      schema,
		Offered:     tools.OfferAllowlisted,
		Effect:      effect(t.Annotations),
		Annotations: annotations(t.Annotations),
		Preview:     tools.PreviewLarge,
	}, nil
}

// annotations keeps the server's hints as given.
func annotations(a *sdk.ToolAnnotations) *schematype.ToolAnnotations {
	if a == nil {
		return nil
	}
	readOnly, idempotent := a.ReadOnlyHint, a.IdempotentHint
	return &schematype.ToolAnnotations{Title: a.Title, ReadOnlyHint: &readOnly, DestructiveHint: a.DestructiveHint,
		IdempotentHint: &idempotent, OpenWorldHint: a.OpenWorldHint}
}

// effect reads the server's hints; a tool that gives none may change
// anything, so it is never repeated once it may have run.
func effect(a *sdk.ToolAnnotations) tools.Effect {
	switch {
	case a == nil:
		return tools.EffectWrite
	case a.ReadOnlyHint:
		return tools.EffectRead
	case a.IdempotentHint:
		return tools.EffectIdempotent
	default:
		return tools.EffectWrite
	}
}

// convert flattens a tool result: structured content when the server gave
// some, else its text, else its content blocks as they came.
func convert(res *sdk.CallToolResult) (Result, error) {
	r := Result{IsError: res.IsError, Kind: schematype.KindText}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return Result{}, fmt.Errorf("marshal structured content: %w", err)
		}
		r.Content, r.Kind = b, schematype.KindJSON
		return r, nil
	}
	texts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			texts = append(texts, c.Text)
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Blob == nil {
				texts = append(texts, c.Resource.Text)
				continue
			}
			return media(res, r)
		default:
			return media(res, r)
		}
	}
	r.Content = []byte(strings.Join(texts, "\n"))
	return r, nil
}

func media(res *sdk.CallToolResult, r Result) (Result, error) {
	b, err := json.Marshal(res.Content)
	if err != nil {
		return Result{}, fmt.Errorf("marshal content: %w", err)
	}
	r.Content, r.Kind = b, schematype.KindMedia
	return r, nil
}
