// Package loop runs turns: it fixes the tools, assembles the prompt, calls
// the model, carries out the tool calls it asks for and feeds the results
// back, until the model answers, asks the user a question, fails, is
// cancelled or reaches the step limit. Every step is written as it
// happens, so a reader always sees a complete transcript and a turn
// interrupted by a restart resumes from what was written.
package loop

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/db/queue"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/meter"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/price"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/runtime/store"
	"github.com/toolgate/toolgate/runtime/throttle"
	"github.com/toolgate/toolgate/tools"
)

// Defaults for Config.
const (
	DefaultMaxSteps    = 25
	DefaultConcurrency = 8
)

// Config is what a Runner needs.
type Config struct {
	// Client reads and writes as the system (tenancy.System): the loop acts
	// for the turn, whose scope its tools' resolvers enforce.
	Client     *ent.Client
	Provider   model.Provider
	Signer     *scope.Signer
	Dispatcher *dispatch.Dispatcher
	Events     *events.Bus
	Prices     *price.Table
	// Rates are the prices of the model turns call, by which an agent's
	// AUTO tool loading chooses (offer.Agent.Defers); nil: none known.
	Rates *offer.Rates
	// Apps lists application tools; nil offers none.
	Apps *mcp.Pool
	// Tools are the built-in definitions in registration order.
	Tools []tools.Definition
	// WebProvider: the server has a web provider, so organisations that
	// enabled it are offered the web tools.
	WebProvider bool
	// Embeddings: the server has an embedding model, so the tools that
	// need one (memory, knowledge and attachment search) may be offered.
	Embeddings bool
	// EmbeddingsDown, when set, says why that model does not answer now,
	// "" while it does (embed.Down of the watched model): the tools that
	// need it are not offered until it does, and the catalogue says why.
	// Reading it costs a turn nothing.
	EmbeddingsDown func() string
	// Browser: the server found a headless browser, so the artifact review
	// tools travel with the artifact writers.
	Browser bool
	// Budget, when set, is asked after each step whether the turn's user or
	// organisation has spent its monthly limit: a reason stops the turn
	// FAILED with it (users read it in Turn.error); an error (the limits
	// could not be read) fails it as internal. Nil: no limits.
	Budget func(ctx context.Context, organizationID, userID int, now time.Time) (reason string, err error)
	// MaxSteps is the most model calls a turn may make.
	MaxSteps int
	// Concurrency bounds the calls of one model answer run at once.
	Concurrency int
	// MaxTokens is sent with each model call; 0 leaves it to the provider.
	MaxTokens int
	// CallsPerTurn is the most tool calls of each earlier turn replayed
	// (prompt.Keep says which); 0 takes prompt.DefaultCallsPerTurn, a
	// negative value replays every call.
	CallsPerTurn int
	// HistoryBudget is the most characters of earlier turns replayed
	// before the oldest are compacted into a summary (prompt.Due); 0 takes
	// prompt.DefaultBudget of a model not listed (serve passes the
	// configured model's), a negative value never compacts.
	HistoryBudget int
	// Queue is the job queue of the database turns run as jobs in.
	Queue queue.Queue
	// EncodeID gives a row's id as the API shows it, for the conversationId
	// of tool operations.
	EncodeID func(int) string
	// AttributionKey keys the opaque ids of who pays (model.Attribute);
	// serve keeps one in the database so they stay the same across
	// restarts and replicas. Empty: a random key for the Runner's life.
	AttributionKey []byte
	Now            func() time.Time
	Log            *slog.Logger
	// HeartbeatEvery, StaleAfter and SweepEvery time the resume of turns
	// whose runner died; zero takes the defaults below.
	HeartbeatEvery, StaleAfter, SweepEvery time.Duration
	// DrainGrace is how long Close lets tool calls in flight finish.
	DrainGrace time.Duration
	// ApprovalTimeout is how long a call waits for a person's decision
	// before it is declined as "no answer"; zero takes
	// DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// Registerer, when set, receives the runtime's metrics (package meter).
	Registerer prometheus.Registerer
	// TracerProvider, when set, traces each run of a turn (trace.go); nil
	// traces nothing, at no cost.
	TracerProvider trace.TracerProvider
	// TraceSizes adds to the spans the sizes of prompts, answers, tool
	// arguments and results; never their contents.
	TraceSizes bool
}

// Runner runs turns as durable jobs in the database's River queue: a
// turn's job survives a restart and is retried, and any replica's runner
// may work it. It owns its goroutines: Close stops them and waits.
type Runner struct {
	cfg   Config
	queue queue.JobClient
	// store sends every statement of the runner's turns.
	store *store.Store
	// id names this runner in the turns it claims.
	id       string
	base     context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	draining atomic.Bool
	mu       sync.Mutex
	running  map[int]*running
	meter    *meter.Meter
	// builtin names the built-in tools: metrics label tools by these
	// names only, so a name the model invents adds no series.
	builtin map[string]bool
	// tracer is nil when the runner traces nothing.
	tracer trace.Tracer
	// reapedAt is when the sweep last looked for dead turn jobs (reap), in
	// Unix nanoseconds; zero before the first sweep.
	reapedAt atomic.Int64
	// expiredAt is when the sweep last declined the calls that waited
	// past their time (ExpireApprovals), likewise.
	expiredAt atomic.Int64
}

// New returns a Runner; Open starts it working turns.
func New(cfg Config) (*Runner, error) {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.CallsPerTurn == 0 {
		cfg.CallsPerTurn = prompt.DefaultCallsPerTurn
	}
	if cfg.HistoryBudget == 0 {
		cfg.HistoryBudget = prompt.DefaultBudget("")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Events == nil {
		cfg.Events = events.NewBus()
	}
	if cfg.Prices == nil {
		cfg.Prices = price.Default()
	}
	cfg.HeartbeatEvery = cmp.Or(cfg.HeartbeatEvery, HeartbeatEvery)
	cfg.StaleAfter = cmp.Or(cfg.StaleAfter, StaleAfter)
	cfg.SweepEvery = cmp.Or(cfg.SweepEvery, SweepEvery)
	cfg.DrainGrace = cmp.Or(cfg.DrainGrace, DefaultDrainGrace)
	cfg.ApprovalTimeout = cmp.Or(cfg.ApprovalTimeout, DefaultApprovalTimeout)
	if len(cfg.AttributionKey) == 0 {
		cfg.AttributionKey = make([]byte, 32)
		if _, err := rand.Read(cfg.AttributionKey); err != nil {
			return nil, fmt.Errorf("attribution key: %w", err)
		}
	}
	id, err := store.NewRef()
	if err != nil {
		return nil, err
	}
	base, stop := context.WithCancel(tenancy.System(context.Background()))
	r := &Runner{cfg: cfg, id: id, base: base, stop: stop, running: map[int]*running{},
		store: store.New(cfg.Client, cfg.Queue.Dialect(), id, cfg.Now)}
	workers := cfg.Queue.Workers()
	if err := river.AddWorkerSafely(workers, &turnWorker{r: r}); err != nil {
		stop()
		return nil, err
	}
	q, err := cfg.Queue.Client(&river.Config{
		// River records the client's ID as each job's worker (attempted_by):
		// the runner's own, as its claims carry it, so reap tells a job whose
		// process died from one that holds its turn.
		ID: id,
		// A turn's job is fetched as it is inserted; the poll finds only a
		// job no insert here woke the queue for (a retry, another process's),
		// and the sweep enqueues again any turn not taken up within
		// StaleAfter: the poll is a safety net behind it, once a minute on
		// both databases.
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100, FetchPollInterval: queue.ListenPoll}},
		Workers: workers,
		// A turn takes as long as it takes; the step limit bounds it.
		JobTimeout: -1,
		// A job whose process died is never rescued by River (no timeout):
		// the sweep enqueues its turn again once its heartbeat is stale, the
		// claim in work keeps a live one from running twice, and reap
		// finishes the dead job's row. New jobs
		// are fetched as they are inserted (queue.Queue.Client): a turn starts
		// at once, and an idle queue polls rarely.
		FetchCooldown: 5 * time.Millisecond,
		// A database outage fails every poll: one line per back-off.
		Logger: slog.New(throttle.New(cfg.Log.Handler(), throttle.Options{})),
	})
	if err != nil {
		stop()
		return nil, err
	}
	r.queue = q
	if cfg.Registerer != nil {
		r.meter = meter.New(cfg.Registerer, r.queueDepth)
	}
	if cfg.TracerProvider != nil {
		r.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	r.builtin = make(map[string]bool, len(cfg.Tools))
	for _, d := range cfg.Tools {
		r.builtin[d.Name] = true
	}
	return r, nil
}

// apiID is a row's id as the API shows it: logs name turns and
// conversations the way clients know them.
func (r *Runner) apiID(id int) string {
	if r.cfg.EncodeID != nil {
		return r.cfg.EncodeID(id)
	}
	return strconv.Itoa(id)
}

// toolLabel is a tool's name as metrics label it: a built-in tool's own,
// "application" for an application's, "unknown" for any other.
func (r *Runner) toolLabel(name string) string {
	if r.builtin[name] {
		return name
	}
	if _, _, ok := mcp.SplitToolName(name); ok {
		return "application"
	}
	return "unknown"
}

// queueDepth counts the job queue's jobs by state.
func (r *Runner) queueDepth(ctx context.Context) (map[string]int, error) {
	counts, err := r.cfg.Queue.Executor().JobCountByAllStates(ctx, &riverdriver.JobCountByAllStatesParams{})
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	out := make(map[string]int, len(counts))
	for state, n := range counts {
		out[string(state)] = n
	}
	return out, nil
}

// Ended records a turn ended outside a run (a cancel): its status and
// how long it took from its message.
func (r *Runner) Ended(status string, startedAt time.Time) {
	r.meter.TurnFinished(status, r.cfg.Now().Sub(startedAt))
}

// Open starts working turns, until Close.
func (r *Runner) Open() error {
	if err := r.queue.Start(r.base); err != nil {
		return fmt.Errorf("start job queue: %w", err)
	}
	return nil
}

// ProviderName names the model provider turns run on.
func (r *Runner) ProviderName() string { return r.cfg.Provider.Name() }

// Now is the runner's clock: turns start at its time.
func (r *Runner) Now() time.Time { return r.cfg.Now() }

// Apps returns the pool that lists and calls application tools; nil when
// the runner offers none.
func (r *Runner) Apps() *mcp.Pool { return r.cfg.Apps }

// Events returns the bus the runner publishes on.
func (r *Runner) Events() *events.Bus { return r.cfg.Events }

// Rates are the prices of the model turns call (Config.Rates).
func (r *Runner) Rates() *offer.Rates { return r.cfg.Rates }

// embeddingsDown is EmbeddingsDown, "" when none is set.
func (c Config) embeddingsDown() string {
	if c.EmbeddingsDown == nil {
		return ""
	}
	return c.EmbeddingsDown()
}

// TurnArgs is the job that runs a turn from where it stands.
type TurnArgs struct {
	TurnID int `json:"turn_id"`
	// Steps is how many model calls the turn had made when the job was
	// enqueued, for whoever reads the queue.
	Steps int `json:"steps"`
}

// Kind names the job.
func (TurnArgs) Kind() string { return "toolgate_turn" }

// InsertOpts: no uniqueness. A job of a dead process stays "running" in
// River's table until the sweep finishes it (reap), and a unique job would
// keep its turn from being enqueued again meanwhile; the turn's claim
// (work) is what keeps it from running twice.
func (TurnArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 10}
}

type turnWorker struct {
	river.WorkerDefaults[TurnArgs]
	r *Runner
}

// Timeout: none; the step limit bounds a turn.
func (w *turnWorker) Timeout(*river.Job[TurnArgs]) time.Duration { return -1 }

// Work runs the turn.
func (w *turnWorker) Work(ctx context.Context, job *river.Job[TurnArgs]) error {
	w.r.meter.JobStarted(job.Kind, job.ScheduledAt)
	return w.r.work(ctx, job.Args.TurnID)
}

// RunTurn runs a stored RUNNING turn in the caller's goroutine, exactly as
// its job would, and returns when it ends or pauses. Benchmarks use it to
// measure the loop without the queue's polling.
func (r *Runner) RunTurn(ctx context.Context, turnID int) error {
	return r.work(tenancy.System(ctx), turnID)
}

// Start enqueues a stored RUNNING turn. A turn enqueued twice gets two
// jobs; the first to claim it runs it and the other finds it taken.
func (r *Runner) Start(ctx context.Context, turnID int) (bool, error) {
	ctx = tenancy.System(ctx)
	steps, err := r.store.Steps(ctx, turnID)
	if err != nil {
		return false, err
	}
	return r.enqueue(ctx, turnID, steps)
}

// StartNew enqueues a turn just stored, which has made no model call yet:
// Start without counting its steps.
func (r *Runner) StartNew(ctx context.Context, turnID int) (bool, error) {
	return r.enqueue(tenancy.System(ctx), turnID, 0)
}

func (r *Runner) enqueue(ctx context.Context, turnID, steps int) (bool, error) {
	// A database busy with other writers is waited out here: the sweep
	// would enqueue the turn only once it is stale.
	err := store.Persist(ctx, func(ctx context.Context) error {
		_, err := r.queue.Insert(ctx, TurnArgs{TurnID: turnID, Steps: steps}, nil)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("enqueue turn: %w", err)
	}
	return true, nil
}

// Errors that end a run without ending its turn.
var (
	// errStopped: the runner is stopping; the turn stays RUNNING for another.
	errStopped = errors.New("runner stopped")
	// errLeaseLost: another runner took the turn (this one looked dead), or
	// the turn was cancelled: nothing more is written for it here.
	errLeaseLost = store.ErrLeaseLost
)

// running is a turn this runner runs: its contexts, each cancelled with a
// cause (errStopped, errLeaseLost, or a cancel).
type running struct {
	// cancel stops everything: a cancelled turn, a lost claim, the end of
	// the drain.
	cancel context.CancelCauseFunc
	// stopModel stops a model call in flight: a drain starts with it, as a
	// model call changes nothing and is asked again by whoever resumes.
	stopModel context.CancelCauseFunc
	// ctx is the turn's context: done once the run is cancelled or lost.
	ctx context.Context
	// vouch is what the run vouches for while its tool calls are in
	// flight (Vouches); nil before its first.
	vouch *vouch
}

// vouch is a turn this runner runs, as its scope tokens are checked
// without a statement: its conversation and user, how many of its tool
// batches are in flight, and when the database last said the user is
// active (the run's load, or a scope check that read it).
type vouch struct {
	conversationID, userID int
	batches                int
	confirmed              time.Time
}

// vouchFor is how long the database's word that a turn's user is active
// stands for its scope tokens: a deactivation on another replica reaches
// a turn's tool calls within it (on this one, at once: Revoke).
const vouchFor = 10 * time.Second

// vouchCalls marks a batch of the turn's tool calls in flight until the
// returned func is called; confirmed is when the run's load read the user
// active (zero: it did not).
func (r *Runner) vouchCalls(turnID, conversationID, userID int, confirmed time.Time) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.running[turnID]
	if rt == nil {
		return func() {}
	}
	if rt.vouch == nil {
		rt.vouch = &vouch{conversationID: conversationID, userID: userID, confirmed: confirmed}
	}
	v := rt.vouch
	v.batches++
	return func() {
		r.mu.Lock()
		v.batches--
		r.mu.Unlock()
	}
}

// Vouches reports whether a scope token of the turn, for its conversation
// and user, may be taken without reading the turn: this runner runs it, it
// has tool calls in flight (so it is RUNNING and claimed here), it is not
// cancelled, and its user was read active within vouchFor. Anything else
// is for the database to say.
func (r *Runner) Vouches(turnID, conversationID, userID int) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.running[turnID]
	if rt == nil || rt.vouch == nil || rt.ctx == nil || rt.ctx.Err() != nil {
		return false
	}
	v := rt.vouch
	return v.batches > 0 && v.conversationID == conversationID && v.userID == userID &&
		!v.confirmed.IsZero() && time.Since(v.confirmed) < vouchFor
}

// Confirm records that the database just said the turn runs and its user
// is active (a scope check read it).
func (r *Runner) Confirm(turnID, userID int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt := r.running[turnID]; rt != nil && rt.vouch != nil && rt.vouch.userID == userID {
		rt.vouch.confirmed = time.Now()
	}
}

// Revoke stops vouching for the turns of a user (deactivated): their scope
// tokens are checked against the database again, which refuses them.
func (r *Runner) Revoke(userID int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rt := range r.running {
		if rt.vouch != nil && rt.vouch.userID == userID {
			rt.vouch.confirmed = time.Time{}
		}
	}
}

// work runs one turn in its job. It first claims the turn with one
// conditional update: a turn another live runner holds (its heartbeat
// fresh), or that no longer runs, needs nothing from this job.
func (r *Runner) work(jobCtx context.Context, turnID int) error {
	jobCtx = tenancy.System(jobCtx)
	if r.draining.Load() {
		// Stopping: the sweep of a live runner, or the next start, takes it.
		return nil
	}
	t := r.newTurnRun(turnID, r.cfg.Log.With("turn", r.apiID(turnID)))
	claimed, loaded, err := r.store.Claim(jobCtx, turnID, r.cfg.StaleAfter)
	if err != nil {
		return err
	}
	t.loaded = loaded
	if !claimed {
		return nil
	}
	jobCtx, span := r.startRun(jobCtx, turnID)

	// The turn's context is not the job's: a stop lets calls in flight
	// finish for the drain grace before they are cut (Close).
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(jobCtx))
	defer cancel(nil)
	mctx, stopModel := context.WithCancelCause(ctx)
	defer stopModel(nil)
	r.mu.Lock()
	r.running[turnID] = &running{cancel: cancel, stopModel: stopModel, ctx: ctx}
	draining := r.draining.Load()
	r.mu.Unlock()
	if draining {
		stopModel(errStopped)
	}
	defer func() {
		r.mu.Lock()
		delete(r.running, turnID)
		r.mu.Unlock()
	}()
	// A turn cancelled on another replica: its STATUS event arrives over
	// the bridged bus, and the database says it no longer runs.
	sub := r.cfg.Events.Subscribe(turnID)
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		defer sub.Close()
		beat := time.NewTicker(r.cfg.HeartbeatEvery)
		defer beat.Stop()
		lastBeat := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-beat.C:
				if cause := r.heartbeat(ctx, turnID, &lastBeat); cause != nil {
					cancel(cause)
					return
				}
			case e, ok := <-sub.C:
				if !ok {
					return
				}
				// Only a cancel is asked of the database: the turn's own
				// STATUS events (a pause, its end) need no statement.
				if e.Kind == events.Status && e.Status == string(turn.StatusCANCELLED) && r.stopped(ctx, turnID) {
					cancel(context.Canceled)
					return
				}
			}
		}
	}()
	t.modelCtx, t.span = mctx, span
	runErr := t.run(ctx)
	stopped := t.end(ctx, runErr)
	endRun(span, runErr, stopped)
	cancel(nil)
	watch.Wait()
	if stopped {
		// Left RUNNING by a stop: released with no heartbeat, so a live
		// runner's sweep, or this one's next start, takes it at once.
		err = store.Persist(context.WithoutCancel(jobCtx), func(ctx context.Context) error {
			return r.store.Release(ctx, turnID)
		})
		if err != nil {
			return fmt.Errorf("release turn: %w", err)
		}
	}
	return nil
}

// heartbeat says this runner still holds the turn. It returns why the run
// must stop: the claim was lost (another runner took the turn, or it was
// cancelled), or no beat got through for so long that another may have
// taken it.
func (r *Runner) heartbeat(ctx context.Context, turnID int, last *time.Time) error {
	held, err := r.store.Heartbeat(ctx, turnID)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return nil
		}
		r.cfg.Log.Warn("turn heartbeat", "turn", r.apiID(turnID), "err", err)
		if time.Since(*last) > r.cfg.StaleAfter-r.cfg.HeartbeatEvery {
			// Soon stale to the others: stop before one of them starts.
			return errLeaseLost
		}
		return nil
	case !held:
		st, err := r.store.Status(ctx, turnID)
		if err != nil || st != turn.StatusRUNNING {
			// Paused or ended by this run, or cancelled: the run sees it.
			if err == nil && st == turn.StatusCANCELLED {
				return context.Canceled
			}
			return nil
		}
		return errLeaseLost
	}
	*last = time.Now()
	return nil
}

// stopped reports whether the database says the turn was cancelled.
func (r *Runner) stopped(ctx context.Context, turnID int) bool {
	// Not cancelled with the run: lib/pq opens a new connection to send a
	// cancel, for a count that takes a millisecond.
	cancelled, err := r.store.Cancelled(context.WithoutCancel(ctx), turnID)
	return err == nil && cancelled
}

// Cancel stops a turn running here and reports whether one was.
func (r *Runner) Cancel(turnID int) bool {
	r.mu.Lock()
	rt, ok := r.running[turnID]
	r.mu.Unlock()
	if ok {
		rt.cancel(context.Canceled)
	}
	return ok
}

// Running reports whether the turn runs here now.
func (r *Runner) Running(turnID int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.running[turnID]
	return ok
}

// Close drains the runner: it takes no new turn, stops model calls in
// flight (they change nothing and are asked again), lets tool calls in
// flight finish for the drain grace, then cuts the rest and waits, or
// gives up when ctx ends. Turns that were running stay RUNNING, released
// for another runner, here after a restart or on another replica; a call
// cut at the end of the grace is left for whoever resumes the turn, which
// repeats it only if it is safe to repeat and otherwise records that it
// may or may not have run.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	r.draining.Store(true)
	for _, rt := range r.running {
		rt.stopModel(errStopped)
	}
	r.mu.Unlock()
	grace, cancel := context.WithTimeout(ctx, r.cfg.DrainGrace)
	defer cancel()
	// Fetch nothing new, and wait for the jobs in flight: each stops at its
	// next step, or when its tool calls are done.
	err := r.queue.Stop(grace)
	if err != nil {
		r.mu.Lock()
		for _, rt := range r.running {
			rt.cancel(errStopped)
		}
		r.mu.Unlock()
		err = r.queue.StopAndCancel(ctx)
	}
	r.stop()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// Timing defaults: a running turn's runner refreshes its heartbeat every
// HeartbeatEvery; a turn whose heartbeat is older than StaleAfter (its
// runner died) is taken up by the sweep, which runs when the oldest
// heartbeat would go stale and never more often than every SweepEvery: a
// turn whose process died resumes within StaleAfter plus SweepEvery.
const (
	HeartbeatEvery    = 2 * time.Second
	StaleAfter        = 10 * time.Second
	SweepEvery        = 2 * time.Second
	DefaultDrainGrace = 20 * time.Second
)

// Resume enqueues the turns left RUNNING whose runner is gone (no
// heartbeat, or a stale one). Each is first marked queued as of now with
// one conditional update, so of several replicas sweeping at once exactly
// one enqueues it, and none again until that job too looks dead. It
// returns how many it enqueued.
func (r *Runner) Resume(ctx context.Context) (int, error) {
	n, _, err := r.resume(ctx)
	return n, err
}

// resume is Resume, and says when the next sweep is due: when the oldest
// heartbeat of the turns still running would go stale, and no later than
// StaleAfter from now, as a turn that starts after this sweep cannot go
// stale before then. An idle server sweeps every StaleAfter, a dead
// runner's turn is taken up as soon as it is stale.
func (r *Runner) resume(ctx context.Context) (int, time.Duration, error) {
	ctx = tenancy.System(ctx)
	now := r.cfg.Now()
	next := r.cfg.StaleAfter
	running, err := r.store.Running(ctx)
	if err != nil {
		return 0, r.cfg.SweepEvery, err
	}
	n := 0
	for _, t := range running {
		if t.HeartbeatAt != nil && !t.HeartbeatAt.Before(now.Add(-r.cfg.StaleAfter)) {
			next = min(next, t.HeartbeatAt.Add(r.cfg.StaleAfter).Sub(now))
			continue
		}
		won, err := r.store.Requeue(ctx, t.ID, now, now.Add(-r.cfg.StaleAfter))
		if err != nil {
			return n, r.cfg.SweepEvery, err
		}
		if !won {
			continue
		}
		if _, err := r.Start(ctx, t.ID); err != nil {
			return n, r.cfg.SweepEvery, err
		}
		n++
	}
	// The jobs of the turns just taken up are dead now; so are those a
	// dead process left behind whose turns ended or paused, looked for at
	// the first sweep and then every ReapEvery.
	if last := r.reapedAt.Load(); n > 0 || last == 0 || time.Since(time.Unix(0, last)) >= ReapEvery {
		at := time.Now()
		if _, err := r.reap(ctx); err != nil {
			return n, r.cfg.SweepEvery, err
		}
		r.reapedAt.Store(at.UnixNano())
	}
	if last := r.expiredAt.Load(); last == 0 || time.Since(time.Unix(0, last)) >= ApprovalSweepEvery {
		r.expiredAt.Store(time.Now().UnixNano())
		if _, err := r.ExpireApprovals(ctx); err != nil {
			return n, r.cfg.SweepEvery, err
		}
	}
	return n, max(next, r.cfg.SweepEvery), nil
}

// Sweep resumes abandoned turns until the runner closes: turns whose
// runner died are taken up by a live one. It sweeps when the oldest
// running turn's heartbeat would go stale, at most every SweepEvery and at
// least every StaleAfter (resume), so an idle server sends one statement
// every StaleAfter.
func (r *Runner) Sweep() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTimer(r.cfg.SweepEvery)
		defer t.Stop()
		for {
			select {
			case <-r.base.Done():
				return
			case <-t.C:
				next := r.cfg.SweepEvery
				if !r.draining.Load() {
					var err error
					if _, next, err = r.resume(r.base); err != nil && r.base.Err() == nil {
						r.cfg.Log.Warn("sweep turns", "err", err)
					}
				}
				t.Reset(next)
			}
		}
	}()
}

// Prompt returns the request the turn's next model call would send: the
// offered tools, the system prompt and the history (summaries, then the
// turns after them). It changes nothing, so it writes no summary; the
// portal can show it, and benchmarks measure assembly with it.
func (r *Runner) Prompt(ctx context.Context, turnID int) (model.Request, error) {
	ctx = tenancy.System(ctx)
	t := r.newTurnRun(turnID, r.cfg.Log)
	if err := t.load(ctx); err != nil {
		return model.Request{}, err
	}
	if _, err := t.history(ctx, false); err != nil {
		return model.Request{}, err
	}
	return t.req, nil
}
