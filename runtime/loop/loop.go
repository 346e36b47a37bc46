// Package loop runs turns: it fixes the tools, assembles the prompt, calls
// the model, carries out the tool calls it asks for and feeds the results
// back, until the model answers, asks the user a question, fails, is
// cancelled or reaches the step limit. Every step is written as it
// happens, so a reader always sees a complete transcript and a turn
// interrupted by a restart resumes from what was written.
package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/price"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/tools"
)

// Defaults for Config.
const (
	DefaultMaxSteps    = 25
	DefaultConcurrency = 8
)

// ClarifyTool is the tool that pauses a turn until the user answers.
const ClarifyTool = "clarify"

// Config is what a Runner needs.
type Config struct {
	// Client reads and writes without a viewer: the loop acts for the turn.
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
	// MaxSteps is the most model calls a turn may make.
	MaxSteps int
	// Concurrency bounds the calls of one model answer run at once.
	Concurrency int
	// MaxTokens is sent with each model call; 0 leaves it to the provider.
	MaxTokens int
	// EncodeID gives a row's id as the API shows it, for the conversationId
	// of tool operations.
	EncodeID func(int) string
	Now      func() time.Time
	Log      *slog.Logger
}

// Runner runs turns in the background. It owns their goroutines: Close
// stops them and waits.
type Runner struct {
	cfg     Config
	base    context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[int]context.CancelFunc
}

// New returns a Runner.
func New(cfg Config) *Runner {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
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
	base, stop := context.WithCancel(context.Background())
	return &Runner{cfg: cfg, base: base, stop: stop, running: map[int]context.CancelFunc{}}
}

// ProviderName names the model provider turns run on.
func (r *Runner) ProviderName() string { return r.cfg.Provider.Name() }

// Now is the runner's clock: turns start at its time.
func (r *Runner) Now() time.Time { return r.cfg.Now() }

// Events returns the bus the runner publishes on.
func (r *Runner) Events() *events.Bus { return r.cfg.Events }

// Start runs a stored RUNNING turn in the background. Starting a turn that
// already runs here does nothing.
func (r *Runner) Start(turnID int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.running[turnID]; ok || r.base.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.base)
	r.running[turnID] = cancel
	// A turn cancelled on another replica: its STATUS event arrives over
	// the bridged bus, and the database says it no longer runs.
	sub := r.cfg.Events.Subscribe(turnID)
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
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
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.running, turnID)
			r.mu.Unlock()
			cancel()
		}()
		r.run(ctx, turnID)
	}()
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

// Close stops every turn and waits for them, or for ctx. Stopped turns stay
// RUNNING in the database and resume at the next Resume.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	ids := make([]int, 0, len(r.running))
	for id := range r.running {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	r.stop()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Let the next process resume them at once rather than after
	// StaleAfter.
	if len(ids) > 0 {
		err := r.cfg.Client.Turn.Update().
			Where(turn.IDIn(ids...), turn.StatusEQ(turn.StatusRUNNING)).
			ClearHeartbeatAt().Exec(ctx)
		if err != nil {
			return fmt.Errorf("release turns: %w", err)
		}
	}
	return nil
}

// Heartbeat timing: a running turn's process refreshes its heartbeat every
// HeartbeatEvery; a turn whose heartbeat is older than StaleAfter (its
// process died) may be resumed by another.
const (
	HeartbeatEvery = 30 * time.Second
	StaleAfter     = 2 * time.Minute
)

// Resume starts the turns left RUNNING whose process is gone: no
// heartbeat, or a stale one. Each is claimed with one conditional update,
// so of several replicas resuming at once exactly one runs it.
func (r *Runner) Resume(ctx context.Context) (int, error) {
	ids, err := r.cfg.Client.Turn.Query().Where(turn.StatusEQ(turn.StatusRUNNING)).IDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("find running turns: %w", err)
	}
	n := 0
	for _, id := range ids {
		if r.Running(id) {
			continue
		}
		now := r.cfg.Now()
		claimed, err := r.cfg.Client.Turn.Update().
			Where(turn.ID(id), turn.StatusEQ(turn.StatusRUNNING),
				turn.Or(turn.HeartbeatAtIsNil(), turn.HeartbeatAtLT(now.Add(-StaleAfter)))).
			SetHeartbeatAt(now).Save(ctx)
		if err != nil {
			return n, fmt.Errorf("claim turn: %w", err)
		}
		if claimed == 1 {
			r.Start(id)
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

func (r *Runner) run(ctx context.Context, turnID int) {
	t := &turnRun{r: r, turnID: turnID, log: r.cfg.Log.With("turn", turnID)}
	err := t.run(ctx)
	switch {
	case err == nil:
	case errors.Is(err, errStopped) || (r.base.Err() != nil && ctx.Err() != nil):
		t.log.Info("turn left running for resume", "reason", "shutdown")
	case ctx.Err() != nil:
		t.finish(turn.StatusCANCELLED, nil, "cancelled")
	default:
		t.log.Error("turn failed", "err", err)
		t.finish(turn.StatusFAILED, nil, err.Error())
	}
}
