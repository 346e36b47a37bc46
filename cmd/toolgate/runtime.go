package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"entgo.io/ent/dialect"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/queue"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/setting"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/anthropic"
	"github.com/toolgate/toolgate/runtime/model/openai"
	"github.com/toolgate/toolgate/runtime/model/replay"
	"github.com/toolgate/toolgate/runtime/price"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/tools/budget"
	"github.com/toolgate/toolgate/tools/embed"
	"github.com/toolgate/toolgate/tools/registry"
)

// runtimeConfig is the turn runtime's part of serve's configuration.
type runtimeConfig struct {
	provider     string
	model        string
	replayScript string
	replayPace   time.Duration
	prices       string
	toolsURL     string
	// local, when set, carries the tools' requests to this server's own
	// handler (no tools URL was given); nil sends them to toolsURL over
	// HTTP.
	local        *dispatch.Local
	maxSteps     int
	historyCalls int
	// historyBudget is in characters; 0 takes the model's default, a
	// negative value never compacts.
	historyBudget int
	drainGrace    time.Duration
	// approvalTimeout: how long a call waits for a decision.
	approvalTimeout time.Duration
	// tracer traces turns; nil traces nothing. traceSizes adds sizes.
	tracer     trace.TracerProvider
	traceSizes bool
	// webProvider: a web provider is configured (the web tools may be offered).
	webProvider bool
	// embeddings: an embedding model is configured (the document search
	// tools may be offered); embedder is that model, watched, so they are
	// offered while it answers.
	embeddings bool
	embedder   embed.Embedder
	// browser: a headless browser was found (the artifact review tools may
	// be offered).
	browser bool
	// textOnly: the model reads no images; tool results' images are not
	// sent to it.
	textOnly bool
}

// newProvider returns the model provider the configuration names. With no
// provider named, a key in the environment picks OpenAI or Anthropic, and
// no key picks the replay of the built-in demo script.
func newProvider(c runtimeConfig) (model.Provider, error) {
	name := c.provider
	if name == "" {
		switch {
		case os.Getenv("OPENAI_API_KEY") != "":
			name = openai.Name
		case os.Getenv("ANTHROPIC_API_KEY") != "":
			name = anthropic.Name
		default:
			name = replay.Name
		}
	}
	switch name {
	case openai.Name:
		return openai.New(openai.Options{Model: c.model, TextOnly: c.textOnly})
	case anthropic.Name:
		return anthropic.New(anthropic.Options{Model: c.model, TextOnly: c.textOnly})
	case replay.Name:
		load := replay.Demo
		if c.replayScript != "" {
			load = func() (*replay.Provider, error) { return replay.Load(c.replayScript) }
		}
		p, err := load()
		if err != nil {
			return nil, err
		}
		return p.Paced(c.replayPace), nil
	}
	return nil, fmt.Errorf("model provider %q: want openai, anthropic or replay", name)
}

// secretKey is the setting that keeps the generated scope-token secret;
// attributionKey the one that keys who pays (model.Attribute), apart from
// it so rotating TOOLGATE_SECRET leaves the ids providers know unchanged.
const (
	secretKey      = "scope_token_secret"
	attributionKey = "attribution_key"
)

// loadSecret returns the secret that signs scope tokens: TOOLGATE_SECRET, or
// one generated on first start and kept in the database, so every replica
// and every restart signs alike.
func loadSecret(ctx context.Context, c *ent.Client) ([]byte, error) {
	if s := os.Getenv("TOOLGATE_SECRET"); s != "" {
		if len(s) < scope.MinSecretLen {
			return nil, fmt.Errorf("TOOLGATE_SECRET must be at least %d characters", scope.MinSecretLen)
		}
		return []byte(s), nil
	}
	return loadKey(ctx, c, secretKey)
}

// loadKey returns the random key kept in the setting named name, generated
// and stored on first start.
func loadKey(ctx context.Context, c *ent.Client, name string) ([]byte, error) {
	ctx = tenancy.System(ctx) // settings are server rows no viewer reaches
	row, err := c.Setting.Query().Where(setting.Key(name)).Only(ctx)
	if err == nil {
		return row.Value, nil
	}
	if !ent.IsNotFound(err) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	secret, err := scope.GenerateSecret()
	if err != nil {
		return nil, err
	}
	// Two replicas starting at once: the second insert loses and reads
	// the first one's key.
	err = c.Setting.Create().SetKey(name).SetValue(secret).OnConflictColumns(setting.FieldKey).DoNothing().Exec(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	row, err = c.Setting.Query().Where(setting.Key(name)).Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return row.Value, nil
}

// newRunner builds the turn runtime over d, calling tools at toolsURL. On
// PostgreSQL its events are bridged to the other replicas (dbURL is needed
// for the bridge's listening connection); the caller closes the bridge.
func newRunner(ctx context.Context, c runtimeConfig, d *db.DB, jobs queue.Queue, dbURL, toolsURL string, log *slog.Logger, reg prometheus.Registerer) (*loop.Runner, *scope.Signer, *mcp.Pool, io.Closer, error) {
	provider, err := newProvider(c)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	prices := price.Default()
	if c.prices != "" {
		if prices, err = price.Load(c.prices); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	client := d.Client()
	secret, err := loadSecret(ctx, client)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	signer, err := scope.NewSigner(secret, nil, 15*time.Minute)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	whoPays, err := loadKey(ctx, client, attributionKey)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	httpClient := &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}}
	if c.local != nil {
		httpClient = &http.Client{Transport: c.local}
	}
	apps := mcp.NewPool(&http.Client{Timeout: 2 * time.Minute})
	disp := dispatch.New(toolsURL, httpClient, apps)
	disp.Client = client // the tools carried out in process (clarify, update_tasks)
	bus := events.NewBus()
	var bridge io.Closer = io.NopCloser(nil)
	if d.Dialect == dialect.Postgres {
		br, err := events.NewBridge(dbURL, d.SQL, bus, log)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		bridge = br
	}
	runner, err := loop.New(loop.Config{
		Client:          client,
		Provider:        provider,
		Signer:          signer,
		Dispatcher:      disp,
		Events:          bus,
		Prices:          prices,
		Rates:           modelRates(prices, modelName(c, provider)),
		Apps:            apps,
		Tools:           registry.All(),
		MaxSteps:        c.maxSteps,
		CallsPerTurn:    c.historyCalls,
		HistoryBudget:   historyBudget(c, provider),
		Budget:          budget.Stopper(client),
		DrainGrace:      c.drainGrace,
		ApprovalTimeout: c.approvalTimeout,
		// Tests only (the crash test): a shorter wait before a dead
		// runner's turns are taken up; the heartbeat and sweep keep pace.
		StaleAfter:     durationEnv("TOOLGATE_TEST_STALE_AFTER", 0),
		HeartbeatEvery: durationEnv("TOOLGATE_TEST_STALE_AFTER", 0) / 5,
		SweepEvery:     durationEnv("TOOLGATE_TEST_STALE_AFTER", 0) / 5,
		WebProvider:    c.webProvider,
		Embeddings:     c.embeddings,
		EmbeddingsDown: func() string { return embed.Down(c.embedder) },
		Browser:        c.browser,
		EncodeID:       graph.EncodeID,
		AttributionKey: whoPays,
		Queue:          jobs,
		Log:            log,
		Registerer:     reg,
		TracerProvider: c.tracer,
		TraceSizes:     c.traceSizes,
	})
	if err != nil {
		_ = bridge.Close()
		return nil, nil, nil, nil, err
	}
	log.Info("turn runtime", "provider", provider.Name(), "tools", toolsURL, "tools_in_process", c.local != nil)
	return runner, signer, apps, bridge, nil
}

// historyBudget is the configured history budget, or the default for the
// model turns run on (the provider's default model when none is named).
func historyBudget(c runtimeConfig, p model.Provider) int {
	if c.historyBudget != 0 {
		return c.historyBudget
	}
	return prompt.DefaultBudget(modelName(c, p))
}

// modelName is the model turns call: the one configured, else the
// provider's default (the replay provider's name for its own).
func modelName(c runtimeConfig, p model.Provider) string {
	if c.model != "" {
		return c.model
	}
	switch p.Name() {
	case openai.Name:
		return openai.DefaultModel
	case anthropic.Name:
		return anthropic.DefaultModel
	case replay.Name:
		return replay.ModelName
	}
	return ""
}

// modelRates are the prices of the model turns call, by which AUTO
// chooses how to send definitions; nil when the table has none.
func modelRates(prices *price.Table, name string) *offer.Rates {
	p, ok := prices.Lookup(name)
	if !ok {
		return nil
	}
	return &offer.Rates{Input: p.Input, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite, Output: p.Output}
}

// intEnv reads an integer setting that may be negative or zero.
func intEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func atoiEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func durationEnv(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
