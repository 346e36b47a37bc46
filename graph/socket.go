package graph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Defaults of the limits on connections; Config overrides them.
const (
	// DefaultReadHeaderTimeout is how long a request's headers may take.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is how long a request, headers and body, may take
	// to arrive; an upload gets DefaultUploadTimeout instead.
	DefaultReadTimeout = 30 * time.Second
	// DefaultUploadTimeout is how long a multipart upload may take.
	DefaultUploadTimeout = 10 * time.Minute
	// DefaultIdleTimeout is how long a kept-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultInitTimeout is how long a websocket may take to send its
	// connection_init; it is then closed with 4408.
	DefaultInitTimeout = 10 * time.Second
	// DefaultSubscriptionsPerSocket is the most subscriptions open at once
	// on one websocket.
	DefaultSubscriptionsPerSocket = 50
	// DefaultSubscriptionsPerToken is the most open at once with one token,
	// over all its websockets on this server.
	DefaultSubscriptionsPerToken = 200
)

// closeInitTimeout is graphql-transport-ws's close code for a socket that
// did not initialise in time.
const closeInitTimeout = 4408

// HTTPServer returns an http.Server serving s with its time limits: no
// request, body or idle connection can be held open past them.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
	}
}

// socket is the state of one websocket, from its upgrade to its end.
type socket struct {
	mu      sync.Mutex
	timer   *time.Timer
	ready   bool // connection_init arrived
	expired bool // ... and too late
	early   bool // a subscribe came before it
	token   string
	subs    int
}

type socketKey struct{}

func socketFrom(ctx context.Context) *socket {
	s, _ := ctx.Value(socketKey{}).(*socket)
	return s
}

// withSocket gives each websocket its state, before gqlgen upgrades it.
func withSocket(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			r = r.WithContext(context.WithValue(r.Context(), socketKey{}, &socket{}))
		}
		next.ServeHTTP(w, r)
	})
}

// socketTimer closes a websocket that has not sent connection_init within
// its time with 4408, as graphql-transport-ws asks (gqlgen's own timeout
// closes with 1002).
type socketTimer struct {
	transport.WebsocketImplementation
	timeout time.Duration
}

// Accept upgrades the connection and starts its clock.
func (t socketTimer) Accept(w http.ResponseWriter, r *http.Request, o transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	conn, err := t.WebsocketImplementation.Accept(w, r, o)
	if err != nil {
		return nil, err
	}
	s := socketFrom(r.Context())
	if s == nil {
		return conn, nil
	}
	s.mu.Lock()
	s.timer = time.AfterFunc(t.timeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.ready {
			s.expired = true
			_ = conn.WriteClose(closeInitTimeout, "Connection initialisation timeout")
		}
	})
	s.mu.Unlock()
	return &initConn{WebsocketConn: conn, s: s}, nil
}

// closeUnauthorized is graphql-transport-ws's close code for a subscribe
// sent before connection_init was acknowledged.
const closeUnauthorized = 4401

// initConn is a websocket as gqlgen reads it, which closes one that
// subscribes before its connection_init with 4401, as graphql-transport-ws
// asks (gqlgen closes on any message before connection_init with 1002).
type initConn struct {
	transport.WebsocketConn
	s *socket
}

// NextReader reads a message; before connection_init it notes whether the
// message was a subscribe.
func (c *initConn) NextReader() (int, io.Reader, error) {
	kind, r, err := c.WebsocketConn.NextReader()
	c.s.mu.Lock()
	ready := c.s.ready
	c.s.mu.Unlock()
	if err != nil || ready || c.Subprotocol() != graphqlTransportWS {
		return kind, r, err
	}
	raw, err := io.ReadAll(r) // the frame is read whole already, within the read limit
	if err != nil {
		return kind, nil, err
	}
	var msg struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &msg) == nil && msg.Type == "subscribe" {
		c.s.mu.Lock()
		c.s.early = true
		c.s.mu.Unlock()
	}
	return kind, bytes.NewReader(raw), nil
}

// WriteClose closes the socket; gqlgen's 1002 for a subscribe before
// connection_init becomes 4401.
func (c *initConn) WriteClose(code int, message string) error {
	c.s.mu.Lock()
	early := c.s.early && !c.s.ready
	c.s.mu.Unlock()
	if early && code == transport.WebsocketCloseProtocolError {
		code, message = closeUnauthorized, "Unauthorized"
	}
	return c.WebsocketConn.WriteClose(code, message)
}

// SetReadLimit and SetReadDeadline reach the connection, as gqlgen asks
// them of it (its payload limit, its pong timeout).
func (c *initConn) SetReadLimit(limit int64) {
	if l, ok := c.WebsocketConn.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(limit)
	}
}

func (c *initConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.WebsocketConn.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return errors.New("websocket: read deadlines unsupported")
}

// graphqlTransportWS names the graphql-transport-ws subprotocol.
const graphqlTransportWS = "graphql-transport-ws"

// initialised stops the socket's clock; false when it had run out.
func (s *socket) initialised(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.ready = true
	sum := sha256.Sum256([]byte(token))
	s.token = string(sum[:])
	return !s.expired
}

// subscriptions counts the subscriptions open on each token.
type subscriptions struct {
	perSocket, perToken int
	mu                  sync.Mutex
	byToken             map[string]int
}

// limit is an operation middleware: a subscription past the socket's or
// the token's cap is refused; the others are counted until they end.
func (c *subscriptions) limit(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	s := socketFrom(ctx)
	if s == nil || oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	c.mu.Lock()
	s.mu.Lock()
	var refusal *gqlerror.Error
	switch {
	case s.subs >= c.perSocket:
		refusal = gqlerror.Errorf("too many subscriptions on this websocket: at most %d at once; complete one first", c.perSocket)
	case c.byToken[s.token] >= c.perToken:
		refusal = gqlerror.Errorf("too many subscriptions with this token: at most %d at once; complete one first", c.perToken)
	default:
		s.subs++
		c.byToken[s.token]++
	}
	s.mu.Unlock()
	c.mu.Unlock()
	if refusal != nil {
		refusal.Extensions = map[string]any{"code": "TOO_MANY_SUBSCRIPTIONS"}
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{refusal}})
	}
	// The subscription's context ends when it completes, is stopped or its
	// socket closes: whichever comes first gives its place back.
	var once sync.Once
	release := func() {
		once.Do(func() {
			c.mu.Lock()
			s.mu.Lock()
			s.subs--
			if c.byToken[s.token]--; c.byToken[s.token] <= 0 {
				delete(c.byToken, s.token)
			}
			s.mu.Unlock()
			c.mu.Unlock()
		})
	}
	context.AfterFunc(ctx, release)
	h := next(ctx)
	return func(ctx context.Context) *graphql.Response {
		r := h(ctx)
		if r == nil {
			release()
		}
		return r
	}
}
