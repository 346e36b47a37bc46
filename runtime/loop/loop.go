// Package loop runs turns: it fixes the tools, assembles the prompt, calls
// the model, carries out the tool calls it asks for and feeds the results
// back, until the model answers, asks the user a question, fails, is
// cancelled or reaches the step limit. Every step is written as it
// happens, so a reader always sees a complete transcript and a turn
// interrupted by a restart resumes from what was written.
package loop

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/price"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/scope"
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
	// Apps lists application tools; nil offers none.
	Apps *mcp.Pool
	// Tools are the built-in definitions in registration order.
	Tools []tools.Definition
	// WebProvider: the server has a web provider, so organisations that
	// enabled it are offered the web tools.
	WebProvider bool
	// Budget, when set, is asked after each step whether the turn's user or
	// organisation has spent its monthly limit: an error stops the turn
	// FAILED with its message as the reason. Nil: no limits.
	Budget func(ctx context.Context, organizationID, userID int, now time.Time) error
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
	// Queue is the River driver of the database turns run as jobs in.
	Queue riverdriver.Driver[*sql.Tx]
	// EncodeID gives a row's id as the API shows it, for the conversationId
	// of tool operations.
	EncodeID func(int) string
	Now      func() time.Time
	Log      *slog.Logger
}

// Runner runs turns as durable jobs in the database's River queue: a
// turn's job survives a restart and is retried, and any replica's runner
// may work it. It owns its goroutines: Close stops them and waits.
type Runner struct {
	cfg     Config
	queue   *river.Client[*sql.Tx]
	base    context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[int]context.CancelFunc
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
	base, stop := context.WithCancel(tenancy.System(context.Background()))
	r := &Runner{cfg: cfg, base: base, stop: stop, running: map[int]context.CancelFunc{}}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &turnWorker{r: r}); err != nil {
		stop()
		return nil, err
	}
	q, err := river.NewClient(cfg.Queue, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
		Workers: workers,
		// A turn takes as long as it takes; the step limit bounds it.
		JobTimeout: -1,
		// A job whose process died is picked up again; the heartbeat check
		// in work keeps a live one from running twice.
		RescueStuckJobsAfter: 5 * time.Minute,
		// database/sql drivers cannot LISTEN: poll, often.
		PollOnly:          true,
		FetchPollInterval: 50 * time.Millisecond,
		FetchCooldown:     10 * time.Millisecond,
		Logger:            cfg.Log,
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("job queue: %w", err)
	}
	r.queue = q
	return r, nil
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

// TurnArgs is the job that runs a turn from where it stands.
type TurnArgs struct {
	TurnID int `json:"turn_id"`
	// Steps is how many model calls the turn had made when the job was
	// enqueued: a turn resumed after a clarification gets a new job even
	// while the job that paused it is still being marked done.
	Steps int `json:"steps"`
}

// Kind names the job.
func (TurnArgs) Kind() string { return "toolgate_turn" }

// InsertOpts keeps one live job per turn and point of progress: a turn
// enqueued twice (resumed while its job waits, say) runs once.
func (TurnArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		MaxAttempts: 10,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled,
		}},
	}
}

type turnWorker struct {
	river.WorkerDefaults[TurnArgs]
	r *Runner
}

// Timeout: none; the step limit bounds a turn.
func (w *turnWorker) Timeout(*river.Job[TurnArgs]) time.Duration { return -1 }

// Work runs the turn.
func (w *turnWorker) Work(ctx context.Context, job *river.Job[TurnArgs]) error {
	return w.r.work(ctx, job.Args.TurnID)
}

// RunTurn runs a stored RUNNING turn in the caller's goroutine, exactly as
// its job would, and returns when it ends or pauses. Benchmarks use it to
// measure the loop without the queue's polling.
func (r *Runner) RunTurn(ctx context.Context, turnID int) error {
	return r.work(tenancy.System(ctx), turnID)
}

// Start enqueues a stored RUNNING turn. It reports whether a new job was
// enqueued (false when the turn already has one).
func (r *Runner) Start(ctx context.Context, turnID int) (bool, error) {
	ctx = tenancy.System(ctx)
	steps, err := r.cfg.Client.ModelCall.Query().Where(modelcall.TurnID(turnID), modelcall.KindEQ(modelcall.KindSTEP)).Count(ctx)
	if err != nil {
		return false, fmt.Errorf("count steps: %w", err)
	}
	res, err := r.queue.Insert(ctx, TurnArgs{TurnID: turnID, Steps: steps}, nil)
	if err != nil {
		return false, fmt.Errorf("enqueue turn: %w", err)
	}
	return !res.UniqueSkippedAsDuplicate, nil
}

// work runs one turn in its job. It first claims the turn with one
// conditional update of its heartbeat: a turn another live process runs
// (its heartbeat fresh) waits; a turn that no longer runs needs nothing.
func (r *Runner) work(jobCtx context.Context, turnID int) error {
	jobCtx = tenancy.System(jobCtx)
	now := r.cfg.Now()
	claimed, err := r.cfg.Client.Turn.Update().
		Where(turn.ID(turnID), turn.StatusEQ(turn.StatusRUNNING),
			turn.Or(turn.HeartbeatAtIsNil(), turn.HeartbeatAtLT(now.Add(-StaleAfter)))).
		SetHeartbeatAt(now).Save(jobCtx)
	if err != nil {
		return fmt.Errorf("claim turn: %w", err)
	}
	if claimed == 0 {
		live, err := r.cfg.Client.Turn.Query().Where(turn.ID(turnID), turn.StatusEQ(turn.StatusRUNNING)).Exist(jobCtx)
		if err != nil {
			return fmt.Errorf("check turn: %w", err)
		}
		if live {
			return river.JobSnooze(StaleAfter)
		}
		return nil
	}

	ctx, cancel := context.WithCancel(jobCtx)
	defer cancel()
	r.mu.Lock()
	r.running[turnID] = cancel
	r.mu.Unlock()
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
		beat := time.NewTicker(HeartbeatEvery)
		defer beat.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-beat.C:
				r.heartbeat(ctx, turnID)
			case e, ok := <-sub.C:
				if !ok {
					return
				}
				if e.Kind == events.Status && r.stopped(ctx, turnID) {
					cancel()
					return
				}
			}
		}
	}()
	stopped := r.run(ctx, turnID)
	cancel()
	watch.Wait()
	// Whoever runs the turn next (a resume after a clarification, a retry
	// after a stop) claims it at once.
	err = r.cfg.Client.Turn.UpdateOneID(turnID).ClearHeartbeatAt().Exec(context.WithoutCancel(jobCtx))
	if err != nil {
		return fmt.Errorf("release turn: %w", err)
	}
	if stopped {
		// Left RUNNING by a stop: the job's retry resumes it.
		return errStopped
	}
	return nil
}

// heartbeat says this process still runs the turn.
func (r *Runner) heartbeat(ctx context.Context, turnID int) {
	err := r.cfg.Client.Turn.Update().Where(turn.ID(turnID), turn.StatusEQ(turn.StatusRUNNING)).
		SetHeartbeatAt(r.cfg.Now()).Exec(ctx)
	if err != nil && ctx.Err() == nil {
		r.cfg.Log.Warn("turn heartbeat", "turn", turnID, "err", err)
	}
}

// stopped reports whether the database says the turn was cancelled.
func (r *Runner) stopped(ctx context.Context, turnID int) bool {
	n, err := r.cfg.Client.Turn.Query().Where(turn.ID(turnID), turn.StatusEQ(turn.StatusCANCELLED)).Count(ctx)
	return err == nil && n > 0
}

// Cancel stops a turn running here and reports whether one was.
func (r *Runner) Cancel(turnID int) bool {
	r.mu.Lock()
	cancel, ok := r.running[turnID]
	r.mu.Unlock()
	if ok {
		cancel()
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

// Close stops working turns and waits, or gives up when ctx ends. Turns
// that were running stay RUNNING; their jobs are retried, here after a
// restart or by another replica.
func (r *Runner) Close(ctx context.Context) error {
	r.stop()
	err := r.queue.StopAndCancel(ctx)
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// Heartbeat timing: a running turn's process refreshes its heartbeat every
// HeartbeatEvery; a turn whose heartbeat is older than StaleAfter (its
// process died) may be resumed by another.
const (
	HeartbeatEvery = 30 * time.Second
	StaleAfter     = 2 * time.Minute
)

// Resume enqueues the turns left RUNNING whose process is gone (no
// heartbeat, or a stale one) and that have no live job, such as a turn
// whose enqueue was lost. It returns how many it enqueued.
func (r *Runner) Resume(ctx context.Context) (int, error) {
	ctx = tenancy.System(ctx)
	ids, err := r.cfg.Client.Turn.Query().
		Where(turn.StatusEQ(turn.StatusRUNNING),
			turn.Or(turn.HeartbeatAtIsNil(), turn.HeartbeatAtLT(r.cfg.Now().Add(-StaleAfter)))).
		IDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("find running turns: %w", err)
	}
	n := 0
	for _, id := range ids {
		added, err := r.Start(ctx, id)
		if err != nil {
			return n, err
		}
		if added {
			n++
		}
	}
	return n, nil
}

// Sweep resumes abandoned turns every interval until the runner closes:
// turns whose process died mid-turn are taken up by a live one.
func (r *Runner) Sweep(interval time.Duration) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-r.base.Done():
				return
			case <-t.C:
				if _, err := r.Resume(r.base); err != nil && r.base.Err() == nil {
					r.cfg.Log.Warn("sweep turns", "err", err)
				}
			}
		}
	}()
}

// Prompt returns the request the turn's next model call would send: the
// offered tools, the system prompt and the whole history. It changes
// nothing; the portal can show it, and benchmarks measure assembly with it.
func (r *Runner) Prompt(ctx context.Context, turnID int) (model.Request, error) {
	ctx = tenancy.System(ctx)
	t := &turnRun{r: r, turnID: turnID, log: r.cfg.Log}
	if err := t.load(ctx); err != nil {
		return model.Request{}, err
	}
	if _, err := t.history(ctx); err != nil {
		return model.Request{}, err
	}
	return t.req, nil
}

// errStopped means the runner is closing: the turn stays RUNNING.
var errStopped = errors.New("runner stopped")

// run runs the turn and records how it ended. It reports whether the turn
// was left RUNNING because the runner is stopping.
func (r *Runner) run(ctx context.Context, turnID int) (stopped bool) {
	t := &turnRun{r: r, turnID: turnID, log: r.cfg.Log.With("turn", turnID)}
	err := t.run(ctx)
	switch {
	case err == nil:
	case errors.Is(err, errStopped) || (r.base.Err() != nil && ctx.Err() != nil):
		t.log.Info("turn left running for resume", "reason", "shutdown")
		return true
	case ctx.Err() != nil:
		t.finish(turn.StatusCANCELLED, nil, "cancelled")
	default:
		t.log.Error("turn failed", "err", err)
		t.finish(turn.StatusFAILED, nil, err.Error())
	}
	return false
}
