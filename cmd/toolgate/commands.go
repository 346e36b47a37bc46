package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/replay"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/tools/artifact/browser"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/embed"
	"github.com/toolgate/toolgate/tools/web"
)

func databaseFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", env("DATABASE_URL", ""),
		"postgres://… for PostgreSQL, sqlite://PATH or file:PATH for SQLite (env DATABASE_URL; default SQLite file "+db.DefaultPath+")")
}

// openOptions are the options every command opens the database with:
// benchmarks set them to count statements.
var openOptions db.Options

// openMigrated opens the database and brings its schema up to date.
func openMigrated(ctx context.Context, url string) (*db.DB, error) {
	d, err := db.OpenWith(ctx, url, openOptions)
	if err != nil {
		return nil, err
	}
	if err := d.Migrate(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, err := openMigrated(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Fprintln(stdout, "schema up to date")
	return nil
}

func bootstrap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs)
	org := fs.String("org", "", "organisation name (created if new)")
	user := fs.String("user", "", "user name (created if new in the organisation)")
	dept := fs.String("department", "", "the user's department")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if strings.TrimSpace(*org) == "" || strings.TrimSpace(*user) == "" {
		return errors.New("bootstrap needs --org and --user")
	}
	d, err := openMigrated(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer d.Close()
	g, err := auth.Bootstrap(ctx, d.Client(), strings.TrimSpace(*org), strings.TrimSpace(*user), strings.TrimSpace(*dept))
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]string{
		"token":          g.Token,
		"organizationId": graph.EncodeID(g.OrganizationID),
		"userId":         graph.EncodeID(g.UserID),
	})
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", env("TOOLGATE_ADDR", "127.0.0.1:8080"), "listen address (env TOOLGATE_ADDR)")
	dbURL := databaseFlag(fs)
	demo := fs.Bool("demo", env("TOOLGATE_DEMO", "") == "true", "seed a demo organisation, user and agent, and print a demo token (env TOOLGATE_DEMO=true)")
	var rc runtimeConfig
	fs.StringVar(&rc.provider, "model-provider", env("TOOLGATE_MODEL_PROVIDER", ""), "openai, anthropic or replay (env TOOLGATE_MODEL_PROVIDER; default: openai or anthropic when its API key is set, else replay)")
	fs.StringVar(&rc.model, "model", env("TOOLGATE_MODEL", ""), "model name sent to the provider (env TOOLGATE_MODEL; default: the provider's)")
	fs.StringVar(&rc.replayScript, "replay-script", env("TOOLGATE_REPLAY_SCRIPT", ""), "JSON script the replay provider plays (env TOOLGATE_REPLAY_SCRIPT; default: the built-in demo)")
	fs.DurationVar(&rc.replayPace, "replay-pace", durationEnv("TOOLGATE_REPLAY_PACE", replay.DefaultPace), "wait between the replay provider's streamed pieces of text (env TOOLGATE_REPLAY_PACE; 0: at once)")
	fs.StringVar(&rc.prices, "prices", env("TOOLGATE_PRICES", ""), "JSON price table overriding the defaults (env TOOLGATE_PRICES)")
	fs.StringVar(&rc.toolsURL, "tools-url", env("TOOLGATE_TOOLS_URL", ""), "GraphQL endpoint the runtime calls tools on (env TOOLGATE_TOOLS_URL; default: this server)")
	fs.IntVar(&rc.maxSteps, "max-steps", atoiEnv("TOOLGATE_MAX_STEPS", 25), "most model calls per turn (env TOOLGATE_MAX_STEPS)")
	fs.IntVar(&rc.historyCalls, "history-calls", intEnv("TOOLGATE_HISTORY_CALLS", 8), "most tool calls of each earlier turn replayed in the prompt; evidence and failures keep their place first, the rest get one line (env TOOLGATE_HISTORY_CALLS; -1: all)")
	fs.IntVar(&rc.historyBudget, "history-budget", intEnv("TOOLGATE_HISTORY_BUDGET", 0), "characters of earlier turns replayed before the oldest are compacted into a summary (env TOOLGATE_HISTORY_BUDGET; default 0: an eighth of the model's context, 8,000 to 60,000; -1: never compact)")
	images := fs.Bool("model-images", env("TOOLGATE_MODEL_IMAGES", "true") != "false", "the model reads images: artifact inspections' page images are sent to it (env TOOLGATE_MODEL_IMAGES; false: it hears their summary and ref only)")
	browserExe := fs.String("browser", env(browser.EnvBrowser, ""), "the headless browser the artifact review tools drive (env TOOLGATE_BROWSER; default: Chromium found on PATH; none: the review tools are not offered)")
	fs.DurationVar(&rc.approvalTimeout, "approval-timeout", durationEnv("TOOLGATE_APPROVAL_TIMEOUT", loop.DefaultApprovalTimeout), "how long a tool call waits for a person's decision before it is declined as no answer (env TOOLGATE_APPROVAL_TIMEOUT)")
	fs.DurationVar(&rc.drainGrace, "drain-grace", durationEnv("TOOLGATE_DRAIN_GRACE", loop.DefaultDrainGrace), "on SIGTERM, how long tool calls in flight may finish before the process stops (env TOOLGATE_DRAIN_GRACE)")
	var wc web.Config
	fs.StringVar(&wc.Provider, "web-provider", env("TOOLGATE_WEB_PROVIDER", ""), "web search provider: searxng, brave or tavily (env TOOLGATE_WEB_PROVIDER; default: none, the web tools are not offered)")
	fs.StringVar(&wc.URL, "web-provider-url", env("TOOLGATE_WEB_PROVIDER_URL", ""), "the provider's endpoint; required for searxng (env TOOLGATE_WEB_PROVIDER_URL)")
	fs.StringVar(&wc.Key, "web-provider-key", env("TOOLGATE_WEB_PROVIDER_KEY", ""), "the provider's API key (env TOOLGATE_WEB_PROVIDER_KEY)")
	fs.StringVar(&wc.AllowPrivate, "web-allow-private", env("TOOLGATE_WEB_ALLOW_PRIVATE", ""), "comma-separated CIDRs page reads may reach although private: tests only, never in production (env TOOLGATE_WEB_ALLOW_PRIVATE)")
	var ec embed.Config
	fs.StringVar(&ec.Provider, "embedding-provider", env("TOOLGATE_EMBEDDING_PROVIDER", ""), "openai, local or none (env TOOLGATE_EMBEDDING_PROVIDER; default: openai when OPENAI_API_KEY is set, else local)")
	fs.StringVar(&ec.Model, "embedding-model", env("TOOLGATE_EMBEDDING_MODEL", ""), "the embedding model (env TOOLGATE_EMBEDDING_MODEL; default: the provider's)")
	probeEvery := fs.Duration("embedding-probe-every", durationEnv("TOOLGATE_EMBEDDING_PROBE_EVERY", embed.DefaultEvery), "how often an embedding model that does not answer is asked again; its tools are offered once it answers (env TOOLGATE_EMBEDDING_PROBE_EVERY)")
	fs.BoolVar(&rc.traceSizes, "trace-sizes", env("TOOLGATE_TRACE_SIZES", "") == "true", "add to traced spans the sizes of prompts, answers, tool arguments and results, never their contents (env TOOLGATE_TRACE_SIZES=true; traces themselves are configured by the OTEL_* variables)")
	var pf portalFlags
	pf.register(fs)
	extractCPU := fs.Duration("extract-cpu", durationEnv("TOOLGATE_EXTRACT_CPU", document.DefaultLimits.CPU), "CPU time one uploaded file's extraction may take, in a child process; its wall time is 60s or three times it, the longer (env TOOLGATE_EXTRACT_CPU)")
	extractMemory := fs.Int64("extract-memory-bytes", int64(atoiEnv("TOOLGATE_EXTRACT_MEMORY_BYTES", int(document.DefaultLimits.MemoryBytes))), "memory one uploaded file's extraction may take (env TOOLGATE_EXTRACT_MEMORY_BYTES)")
	maxUpload := fs.Int64("max-upload-bytes", int64(atoiEnv("TOOLGATE_MAX_UPLOAD_BYTES", graph.DefaultMaxUploadBytes)), "body limit of a multipart upload (env TOOLGATE_MAX_UPLOAD_BYTES)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tracer, stopTracing, err := newTracing(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Spans still buffered are sent on the way out, within a bound.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(sctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}()
	rc.tracer = tracer
	// Embedding requests go through the runtime's one retry loop, like
	// model calls: 429, 5xx and dropped connections are tried again.
	ec.Middleware = model.Middleware
	ec.Retry = func(ctx context.Context, call func(context.Context) error) error {
		_, err := model.Call(ctx, retry.Policy{}, "embeddings", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, call(ctx)
		})
		return err
	}
	// So do the web tools' searches and page reads.
	wc.Retry = retry.Backend(retry.Policy{})
	embedder, err := embed.New(ec)
	if err != nil {
		return err
	}
	rc.embeddings = embedder != nil
	if embedder != nil {
		// The tools that need embeddings are offered while the model
		// answers: asked at start, learnt from every request, asked again
		// while it does not answer.
		watched := embed.Watch(embedder, *probeEvery)
		watchCtx, stopWatching := context.WithCancel(ctx)
		watching := make(chan struct{})
		go func() {
			defer close(watching)
			watched.Run(watchCtx)
		}()
		defer func() {
			stopWatching()
			<-watching
		}()
		embedder, rc.embedder = watched, watched
	}
	webService, err := web.New(wc)
	if err != nil {
		return err
	}
	rc.webProvider = webService != nil
	rc.textOnly = !*images
	// The review tools are offered only with a browser; without one the
	// catalogue says so.
	var pages *browser.Pool
	if exe, err := browser.Lookup(*browserExe); err != nil {
		log.Warn("artifact review tools not offered", "err", err)
	} else {
		pages = browser.New(exe, 0, 0)
		defer pages.Close()
		rc.browser = true
	}
	d, err := openMigrated(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer d.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	base := "http://" + ln.Addr().String()
	toolsURL := rc.toolsURL
	if toolsURL == "" {
		// The tools run on this server: their requests go to its handler
		// in process (dispatch.Local), under the URL's name.
		toolsURL = base + "/graphql"
		rc.local = &dispatch.Local{}
	}
	// One registry: the API's metrics and the runtime's on one /metrics.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Turns and documents share one job client: one leader, one poll.
	jobs := d.Queue().Shared()
	runner, signer, apps, bridge, err := newRunner(ctx, rc, d, jobs, *dbURL, toolsURL, log, reg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer apps.Close()
	defer bridge.Close()
	// Uploaded files are read in children of this binary, bounded.
	if *extractCPU < time.Second || *extractMemory < 64<<20 {
		_ = ln.Close()
		return fmt.Errorf("--extract-cpu must be at least 1s and --extract-memory-bytes at least 64 MiB (%d), not %s and %d", 64<<20, *extractCPU, *extractMemory)
	}
	box, err := document.DefaultBox()
	if err != nil {
		_ = ln.Close()
		return err
	}
	cpu := *extractCPU
	box.Limits = document.Limits{CPU: cpu, Wall: max(document.DefaultLimits.Wall, 3*cpu), MemoryBytes: *extractMemory}
	docs, err := document.New(document.Config{DB: d, Queue: jobs, Embedder: embedder, Log: log, Box: box})
	if err != nil {
		_ = ln.Close()
		return err
	}
	// run_code's children are this binary; some are started ahead, and all
	// are ended on the way out.
	sandbox, err := code.Default()
	if err != nil {
		_ = ln.Close()
		return err
	}
	sandbox.Prestart()
	defer sandbox.Close()
	portal, err := pf.config(d, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv := graph.NewServer(graph.Config{DB: d, Log: log, Signer: signer, Runner: runner, Web: webService,
		Documents: docs, Sandbox: sandbox, Browser: pages, MaxUploadBytes: *maxUpload, Registry: reg, TracerProvider: tracer,
		Portal: portal})
	var demoTurn int
	if *demo {
		var token string
		token, demoTurn, err = seedDemo(ctx, d, time.Now(), demoTokenFile(*dbURL))
		if err != nil {
			_ = ln.Close()
			return err
		}
		fmt.Fprintf(stdout, "\ntoolgate is serving on %s\n  open the playground, signed in: %s/playground#token=%s\n  demo token: %s (kept in the data folder and reused while it works)\n  admin console: %s/admin#token=%s (signs in with the demo token)\n", base, base, token, token, base, token)
		if demoTurn != 0 {
			fmt.Fprintf(stdout, "  a demo conversation, \"Budget estimate\", is being answered by the %s provider\n", runner.ProviderName())
		}
		fmt.Fprintln(stdout)
	}
	log.Info("serving", "addr", ln.Addr().String(), "database", d.Dialect, "web", webService.ProviderName(), "tracing", tracer != nil)

	hs := srv.HTTPServer()
	if rc.local != nil {
		rc.local.Serve(hs.Handler)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if err := runner.Open(); err != nil {
		_ = hs.Close()
		return err
	}
	// A stop asked for while starting up (ctx ends) is a shutdown like any
	// other, not a failure of the step it interrupted.
	if err := docs.Open(ctx); err != nil && ctx.Err() == nil {
		_ = hs.Close()
		return err
	}
	n, err := runner.Resume(ctx)
	if demoTurn != 0 {
		n-- // the demo's first turn starts here, it was not left running
	}
	if err != nil && ctx.Err() == nil {
		log.Error("resume turns", "err", err)
	} else if n > 0 {
		log.Info("resumed turns left running", "turns", n)
	}
	runner.Sweep()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "drain_grace", rc.drainGrace)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), rc.drainGrace+15*time.Second)
	defer cancel()
	// Files being read are let go at once (read again after the restart).
	// Turns drain first (no new ones; tool calls in flight finish within
	// the grace), while the server still answers those calls; they stay
	// RUNNING for the next runner. Then the server drains its requests.
	docs.Interrupt()
	if err := runner.Close(shutdownCtx); err != nil {
		log.Warn("turns still stopping", "err", err)
	}
	if err := docs.Close(shutdownCtx); err != nil {
		log.Warn("documents still processing", "err", err)
	}
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
