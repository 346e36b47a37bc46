package graph

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/trace"

	"entgo.io/contrib/entgql"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/conn"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/console"
	"github.com/toolgate/toolgate/graph/generated"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/graph/loader"
	"github.com/toolgate/toolgate/graph/playground"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/artifact/browser"
	"github.com/toolgate/toolgate/tools/budget"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/embed"
	"github.com/toolgate/toolgate/tools/history"
	"github.com/toolgate/toolgate/tools/memory"
	"github.com/toolgate/toolgate/tools/web"
)

// Limits of the HTTP API.
const (
	// MaxBodyBytes is the largest request body served.
	MaxBodyBytes = 1 << 20
	// MaxComplexity bounds the work one operation may ask for; a connection
	// counts its children once per item of the page it asks for.
	MaxComplexity = 20_000
)

// Config is what the server needs.
type Config struct {
	DB  *db.DB
	Log *slog.Logger
	// Registry receives the metrics; a new one is made when nil.
	Registry *prometheus.Registry
	// Ready reports whether migrations were applied; nil means they were.
	Ready func(context.Context) error
	// Signer verifies turns' scope tokens; nil refuses them all.
	Signer *scope.Signer
	// Runner runs turns; nil serves the data only (sendMessage then stores
	// turns that nothing runs).
	Runner *loop.Runner
	// Web runs the web tools; nil: no provider, the web tools are refused.
	Web *web.Service
	// Sandbox runs run_code; nil runs it in this binary's own `sandbox`
	// command.
	Sandbox *code.Sandbox
	// Apps asks applications' MCP servers for their tools, for discovery
	// and the catalogue; nil takes the Runner's. With neither, application
	// tools are known by name only.
	Apps *mcp.Pool
	// Documents processes uploads and runs the document tools; nil stores
	// uploads that nothing processes, and refuses the document tools.
	Documents *document.Service
	// Browser renders artifacts for inspect_artifact, measure_layout and
	// print_pdf; nil: no browser was found, and they are not offered.
	Browser *browser.Pool
	// MaxUploadBytes is the body limit of a multipart upload; 0 means
	// DefaultMaxUploadBytes. Other requests keep MaxBodyBytes.
	MaxUploadBytes int64
	// Time limits of HTTPServer's connections and of websockets' init, and
	// caps on subscriptions; 0 takes the Default of each.
	ReadHeaderTimeout, ReadTimeout, UploadTimeout, IdleTimeout, InitTimeout time.Duration
	SubscriptionsPerSocket, SubscriptionsPerToken                           int
	// ResolveTranscripts turns the transcript's hot path off: every
	// conversation read, and every read of the root turns, goes through
	// the resolvers, field by field (for comparing the two; see
	// fastRootFields).
	ResolveTranscripts bool
	// TracerProvider, when set, gives requests server spans and operations
	// and resolvers spans of their own (trace.go); nil traces nothing.
	TracerProvider trace.TracerProvider
	// Portal is CORS, sign-in, rate limits and the schema endpoint
	// (portal.go).
	Portal PortalConfig
}

// Server is toolgate's HTTP API.
type Server struct {
	cfg      Config
	client   *ent.Client // every query limited to the request's viewer by ent's privacy policies
	auth     *auth.Authenticator
	gql      *handler.Server
	registry *prometheus.Registry
	mux      *http.ServeMux
	// handler is the mux, traced when the server traces.
	handler http.Handler
	// limits are the rate limits (ratelimit.go).
	limits *limits
	// loaderWait is how long a response's loaders gather keys that arrive
	// one by one (loader.Wait; tests set it).
	loaderWait time.Duration
}

// NewServer builds the HTTP API over cfg.DB.
func NewServer(cfg Config) *Server {
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.ReadHeaderTimeout = cmp.Or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, DefaultReadTimeout)
	cfg.UploadTimeout = cmp.Or(cfg.UploadTimeout, DefaultUploadTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.InitTimeout = cmp.Or(cfg.InitTimeout, DefaultInitTimeout)
	cfg.SubscriptionsPerSocket = cmp.Or(cfg.SubscriptionsPerSocket, DefaultSubscriptionsPerSocket)
	cfg.SubscriptionsPerToken = cmp.Or(cfg.SubscriptionsPerToken, DefaultSubscriptionsPerToken)
	if cfg.Sandbox == nil {
		// Without the binary's path run_code answers an error; the rest serves.
		cfg.Sandbox, _ = code.Default()
		if cfg.Sandbox == nil {
			cfg.Sandbox = code.New("")
		}
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	client := cfg.DB.Client()
	s := &Server{
		cfg:        cfg,
		client:     client,
		auth:       auth.NewAuthenticator(client, cfg.Log),
		registry:   reg,
		mux:        http.NewServeMux(),
		loaderWait: loader.Wait,
	}
	if cfg.Signer != nil {
		s.auth.Scope = scopeResolver(client, cfg.Signer, cfg.Runner)
	}
	s.portal()
	s.gql = s.newGraphQL()
	m := newMetrics(reg)
	s.gql.Use(m)

	// The token first: nothing of the body is read for a caller without one.
	graphqlHandler := withSocket(s.auth.Middleware(limitBody(cfg.MaxUploadBytes, cfg.UploadTimeout, jsonStatus(s.gql))))
	s.mux.Handle("/graphql", m.http("/graphql", graphqlHandler))
	pg := playground.Handler("toolgate", "/playground", "/graphql", map[string]string{"Authorization": "Bearer "})
	s.mux.Handle("/playground", pg)
	s.mux.Handle("/playground/", pg)
	// The admin console: a page of its own reading the API above with the
	// token its user signs in with; the page itself needs none.
	adminConsole := console.Handler("/admin", "/graphql")
	s.mux.Handle("/admin", adminConsole)
	s.mux.Handle("/admin/", adminConsole)
	s.mux.Handle("/artifacts/{id}/versions/{n}", s.auth.Middleware(artifactVersionHandler(client, cfg.Log)))
	s.mux.Handle("/conversations/{conversationId}/files/{path...}", s.auth.Middleware(fileHandler(client, cfg.Log)))
	s.mux.Handle(UsageCSVPath, s.auth.Middleware(usageCSVHandler(client, cfg.Log, (&Resolver{Runner: cfg.Runner}).now)))
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.HandleFunc("/readyz", s.readyz)
	s.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s.portalRoutes()
	s.handler = s.portalHandler(s.mux)
	if cfg.TracerProvider != nil {
		s.handler = traceHTTP(cfg.TracerProvider, s.handler)
	}
	return s
}

// Authenticator returns the server's authenticator, for wiring scope tokens.
func (s *Server) Authenticator() *auth.Authenticator { return s.auth }

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	err := s.cfg.DB.SQL.PingContext(ctx)
	if err == nil && s.cfg.Ready != nil {
		err = s.cfg.Ready(ctx)
	}
	w.Header().Set("Content-Type", "text/plain")
	if err != nil {
		s.cfg.Log.WarnContext(ctx, "not ready", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready\n")
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

func (s *Server) newGraphQL() *handler.Server {
	apps := s.cfg.Apps
	if apps == nil && s.cfg.Runner != nil {
		apps = s.cfg.Runner.Apps()
	}
	cfg := generated.Config{Resolvers: &Resolver{Client: s.client, Dialect: s.cfg.DB.Dialect, Log: s.cfg.Log, Runner: s.cfg.Runner, Apps: apps, Web: s.cfg.Web, Sandbox: s.cfg.Sandbox, Documents: s.cfg.Documents, Browser: s.cfg.Browser,
		History: history.New(s.cfg.DB), Memory: memory.New(s.cfg.DB, s.embedder(), gid.Encode)}}
	cfg.Resolvers.(*Resolver).limits = s.limits
	pageTimes := func(child int, first, last *int) int {
		n := DefaultPage
		if first != nil {
			n = *first
		} else if last != nil {
			n = *last
		}
		return 1 + child*max(n, 1)
	}
	cfg.Complexity.Query.Conversations = func(child int, _ *entgql.Cursor[int], first *int, _ *entgql.Cursor[int], last *int, _ []*ent.ConversationOrder, _ *ent.ConversationWhereInput) int {
		return pageTimes(child, first, last)
	}
	cfg.Complexity.Query.Agents = func(child int, first *int, _ *entgql.Cursor[int], last *int, _ *entgql.Cursor[int], _ []*ent.AgentOrder, _ *ent.AgentWhereInput) int {
		return pageTimes(child, first, last)
	}
	cfg.Complexity.Conversation.Turns = func(child int, _ *entgql.Cursor[int], first *int, _ *entgql.Cursor[int], last *int, _ []*ent.TurnOrder, _ *ent.TurnWhereInput) int {
		return pageTimes(child, first, last)
	}
	cfg.Complexity.Turn.ToolCalls = func(child int) int { return 1 + child*10 }
	cfg.Complexity.Query.KnowledgeBases = func(child int, first *int, _ *entgql.Cursor[int], last *int, _ *entgql.Cursor[int], _ []*ent.KnowledgeBaseOrder) int {
		return pageTimes(child, first, last)
	}
	cfg.Complexity.Query.Memories = func(child int, first *int, _ *entgql.Cursor[int], last *int, _ *entgql.Cursor[int], _ []*ent.MemoryOrder) int {
		return pageTimes(child, first, last)
	}
	cfg.Complexity.KnowledgeBase.Documents = func(child int, _ *entgql.Cursor[int], first *int, _ *entgql.Cursor[int], last *int, _ []*ent.DocumentOrder) int {
		return pageTimes(child, first, last)
	}

	es := generated.NewExecutableSchema(cfg)
	hideCodegenDirectives(es.Schema())
	srv := handler.New(es)
	srv.AddTransport(transport.Websocket{
		KeepAlivePingInterval: 10 * time.Second,
		// A socket that never says who it is is not held open: closed
		// with 4408 after InitTimeout.
		Implementation: socketTimer{WebsocketImplementation: transport.CoderWebsocketImplementation{}, timeout: s.cfg.InitTimeout},
		InitFunc:       s.websocketInit,
	})
	// Before POST, which would take its requests too.
	srv.AddTransport(sse{transport.SSE{KeepAlivePingInterval: 10 * time.Second}})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(post{})
	// Uploads (the GraphQL multipart request spec): files past 32 MiB of
	// memory spill to temporary files; limitBody bounds the whole body.
	srv.AddTransport(transport.MultipartForm{MaxUploadSize: s.cfg.MaxUploadBytes, MaxMemory: 32 << 20})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	if s.cfg.TracerProvider != nil {
		// Outermost: the operation's span holds its transaction.
		srv.Use(tracing{tracer: s.cfg.TracerProvider.Tracer(tracerName)})
	}
	srv.Use(extension.Introspection{})
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](1000)})
	// After the persisted query is put in place, before anything parses it.
	srv.Use(queryLimits{})
	// Priced by the rows an operation can make the server load: a scalar
	// of a row already loaded is free, an object costs one plus its
	// children, a connection multiplies its children by its page size. A
	// portal's transcript page of 100 turns with their calls passes; a page
	// of pages of turns does not.
	srv.Use(extension.FixedComplexityLimit(MaxComplexity, complexity.WithFixedScalarValue(0)))
	srv.Use(pageLimits{})
	srv.Use(transactioner{entgql.Transactioner{TxOpener: s.client}})
	// Fresh loaders for every response: one per request over HTTP, one per
	// event of a subscription, so nothing is cached past what it answers.
	srv.AroundResponses(func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		return next(loader.With(ctx, loader.NewWaiting(s.client, s.loaderWait)))
	})
	srv.AroundResponses(reportAttempts)
	// A query's reads are a reader's: on SQLite they queue for the read
	// pool, not ahead of the writers' own reads (conn.Reading).
	srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		if op := graphql.GetOperationContext(ctx).Operation; op != nil && op.Operation == ast.Query {
			ctx = conn.Reading(ctx)
		}
		return next(ctx)
	})
	subs := &subscriptions{perSocket: s.cfg.SubscriptionsPerSocket, perToken: s.cfg.SubscriptionsPerToken, byToken: map[string]int{}}
	srv.AroundOperations(subs.limit)
	srv.AroundRootFields(scopeGuard)
	srv.AroundRootFields(s.limits.turnsAtOnce)
	srv.AroundRootFields(idempotent)
	if !s.cfg.ResolveTranscripts {
		// Innermost: after the scope guard, like the resolver it stands in for.
		srv.AroundRootFields(fastRootFields(s.cfg.DB.Driver))
	}
	srv.SetErrorPresenter(s.presentError)
	srv.SetRecoverFunc(func(ctx context.Context, p any) error {
		s.cfg.Log.ErrorContext(ctx, "panic in resolver", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return errInternal
	})
	return srv
}

// websocketInit authenticates a websocket from its connection_init payload:
// {"Authorization": "Bearer TOKEN"}. A missing or dead token closes the
// socket with 4401, as over HTTP a request gets 401.
func (s *Server) websocketInit(ctx context.Context, p transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	header := p.Authorization()
	if header == "" {
		if v, ok := p["authorization"].(string); ok {
			header = v
		}
	}
	if header == "" && auth.SessionToken(ctx) != "" {
		header = "Bearer " + auth.SessionToken(ctx) // the upgrade's session cookie
	}
	refuse := func() (context.Context, *transport.InitPayload, error) {
		ctx = transport.WithWebsocketCloseCode(transport.AppendCloseReason(ctx, "unauthenticated"), 4401)
		return ctx, nil, errUnauthenticated
	}
	token, ok := auth.Bearer(header)
	if sock := socketFrom(ctx); sock != nil && !sock.initialised(token) {
		// Too late: the socket is closing with 4408.
		return ctx, nil, errInitTimeout
	}
	if !ok {
		return refuse()
	}
	v, err := s.auth.Resolve(ctx, token)
	if errors.Is(err, auth.ErrNotFound) {
		return refuse()
	}
	if err != nil {
		return ctx, nil, err
	}
	return auth.WithViewer(ctx, v), nil, nil
}

var (
	errUnauthenticated = errors.New("unauthenticated")
	errInitTimeout     = errors.New("connection initialisation timeout")
)

// hideCodegenDirectives drops from the served schema the directives that
// only steer code generation (entgql writes them into its schema file), so
// introspection shows clients the API and nothing of how it is built. The
// parsed schema is one value for the process, shared by every server in
// it: it is changed once, whoever asks first.
func hideCodegenDirectives(schema *ast.Schema) {
	hideOnce.Do(func() {
		for _, name := range []string{"goField", "goModel", "goTag", "goExtraField", "goEnum"} {
			delete(schema.Directives, name)
		}
	})
}

var hideOnce sync.Once

var errInternal = errors.New("internal error")

// presentError is the one place errors become what clients read: the same
// words for "not yours" and "not there", a clear message for bad input,
// and nothing internal.
func (s *Server) presentError(ctx context.Context, err error) *gqlerror.Error {
	gqlErr := graphql.DefaultErrorPresenter(ctx, err)
	var (
		refusal  *tools.Refusal
		failure  *tools.Failure
		outage   *tools.Outage
		absence  *tools.Absence
		exceeded *budget.ExceededError
		valErr   *ent.ValidationError
		conErr   *ent.ConstraintError
		source   *gqlerror.Error
		limited  *RateLimitedError
	)
	switch {
	case errors.As(err, &limited):
		return presentLimited(ctx, gqlErr, limited)
	case errors.Is(err, auth.ErrNotFound) || ent.IsNotFound(err):
		return coded(gqlErr, "not found", "NOT_FOUND")
	case errors.Is(err, auth.ErrForbidden):
		return coded(gqlErr, "not permitted", "FORBIDDEN")
	case errors.As(err, &exceeded):
		return coded(gqlErr, exceeded.Error(), "BUDGET_EXCEEDED")
	case errors.As(err, &refusal):
		return coded(gqlErr, refusal.Error(), "BAD_USER_INPUT")
	case errors.As(err, &failure):
		// It ran and failed (run_code's code threw or hit a bound):
		// not the input's fault, and not worth a retry.
		return coded(gqlErr, failure.Error(), "RUN_FAILED")
	case errors.As(err, &outage):
		// Its backend could not be reached, after the retries: it never ran.
		return coded(gqlErr, outage.Error(), "OUTAGE")
	case errors.As(err, &absence):
		// It ran and found nothing.
		return coded(gqlErr, absence.Error(), "ABSENCE")
	case errors.As(err, &valErr):
		reason := error(valErr)
		for errors.Unwrap(reason) != nil {
			reason = errors.Unwrap(reason)
		}
		return coded(gqlErr, fmt.Sprintf("invalid %s: %v", valErr.Name, reason), "BAD_USER_INPUT")
	case errors.As(err, &conErr):
		return coded(gqlErr, "conflicts with an existing object (a name already in use?)", "CONFLICT")
	case errors.Is(err, errInternal):
		return coded(gqlErr, "internal error", "INTERNAL")
	case errors.As(err, &source) && errors.Unwrap(source) == nil:
		// Parse, validation and variable errors from gqlgen: already clear.
		// Drop the echo of a body that could not be decoded.
		if i := strings.Index(gqlErr.Message, " body:"); i > 0 && strings.HasPrefix(gqlErr.Message, "json request body") {
			gqlErr.Message = gqlErr.Message[:i]
		}
		return gqlErr
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return coded(gqlErr, "request cancelled or timed out", "TIMEOUT")
	default:
		s.cfg.Log.ErrorContext(ctx, "resolver error", "path", gqlErr.Path.String(), "err", err)
		return coded(gqlErr, "internal error", "INTERNAL")
	}
}

func coded(e *gqlerror.Error, msg, code string) *gqlerror.Error {
	e.Message = msg
	e.Extensions = map[string]any{"code": code}
	return e
}

// limitBody refuses bodies over MaxBodyBytes with 413 and a GraphQL error,
// before anything is parsed. An upload may take uploadTimeout to arrive,
// where other bodies have the server's ReadTimeout.
func limitBody(maxUpload int64, uploadTimeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
			// An upload has its own, larger limit, and is streamed.
			if r.ContentLength > maxUpload {
				tooLargeUpload(w, maxUpload)
				return
			}
			// Not supported (a recorder, say): the server's limit stays.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadTimeout))
			r.Body = http.MaxBytesReader(w, r.Body, maxUpload)
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > MaxBodyBytes {
			tooLarge(w)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"errors":[{"message":"could not read request body"}]}`)
			return
		}
		if len(body) > MaxBodyBytes {
			tooLarge(w)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func tooLargeUpload(w http.ResponseWriter, limit int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = fmt.Fprintf(w, `{"errors":[{"message":"upload over %d bytes","extensions":{"code":"BODY_TOO_LARGE"}}]}`, limit)
}

func tooLarge(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = fmt.Fprintf(w, `{"errors":[{"message":"request body over %d bytes","extensions":{"code":"BODY_TOO_LARGE"}}]}`, MaxBodyBytes)
}

// embedder is the server's embedding model, nil without one: the document
// service's, which the memory tools share.
func (s *Server) embedder() embed.Embedder {
	if s.cfg.Documents == nil {
		return nil
	}
	return s.cfg.Documents.Embedder()
}
