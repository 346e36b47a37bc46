package code

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// proc is one started child: its pipes, and how it ended once it has.
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	dec    *json.Decoder
	stderr *stderrLog
	// exited is closed once the child has exited and been reaped; waitErr
	// is then how it ended.
	exited  chan struct{}
	waitErr error
}

// spawn starts a child and returns once it is on its way (not yet ready).
// Its reaper runs until it exits, so a child is never left a zombie.
func (s *Sandbox) spawn() (*proc, error) {
	if s.Path == "" {
		return nil, errors.New("start sandbox: no binary")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_, _ = inR.Close(), inW.Close()
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = []string{ChildEnv + "=1"}
	cmd.Dir = os.TempDir()
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = time.Second
	cmd.Stdin, cmd.Stdout = inR, outW
	p := &proc{cmd: cmd, stdin: inW, stdout: outR, stderr: &stderrLog{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	err = cmd.Start()
	// The child's ends are the child's: the parent keeps its own, so a
	// dead child's pipes answer EOF and EPIPE.
	_, _ = inR.Close(), outW.Close()
	if err != nil {
		_, _ = inW.Close(), outR.Close()
		return nil, fmt.Errorf("start sandbox: %w", err)
	}
	p.dec = json.NewDecoder(bufio.NewReaderSize(outR, 64<<10))
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// ready waits for the child to say it is ready, until ctx ends.
func (p *proc) ready(ctx context.Context) error {
	got := make(chan error, 1)
	go func() {
		var m message
		err := p.dec.Decode(&m)
		if err == nil && !m.Ready {
			err = errors.New("the sandbox spoke before it was ready")
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			p.discard()
			<-p.exited
			return fmt.Errorf("start sandbox: %w (%s)", err, p.stderr.first(300))
		}
		return nil
	case <-ctx.Done():
		p.discard() // ends the read above
		<-got
		return fmt.Errorf("start sandbox: %w", ctx.Err())
	}
}

// dead reports whether the child has exited.
func (p *proc) dead() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// kill ends the child, if it still runs.
func (p *proc) kill() { _ = p.cmd.Process.Kill() }

// release closes the parent's pipe ends: once the child has exited and
// nothing more is read from it.
func (p *proc) release() { _, _ = p.stdin.Close(), p.stdout.Close() }

// discard ends an unused child and releases it once it is reaped: it
// returns at once.
func (p *proc) discard() {
	p.kill()
	go func() {
		<-p.exited
		p.release()
	}()
}

// pool keeps children started ahead, ready to take one job each: a run
// costs a warm child's answer, not a process start. Each child serves
// exactly one run and is then ended, so nothing of a run (globals,
// prototypes, memory) reaches another. It is bounded: at most idle
// children ready or starting, beside the running ones (MaxConcurrent).
type pool struct {
	s    *Sandbox
	idle int

	mu       sync.Mutex
	ready    []*proc
	starting int
	closed   bool
	// live counts every child not yet reaped, ready or running; Close
	// waits for it to reach zero.
	live sync.WaitGroup
}

// readyTimeout bounds how long a child started ahead may take to say it
// is ready before it is given up.
const readyTimeout = 30 * time.Second

// errClosed is a run asked of a closed sandbox.
var errClosed = errors.New("run code: the sandbox is closed")

// take returns a ready, living child and starts replacements in the
// background. With none ready it starts one itself (within ctx). A child
// found dead while waiting is discarded.
func (pl *pool) take(ctx context.Context) (*proc, error) {
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return nil, errClosed
	}
	var p *proc
	for len(pl.ready) > 0 && p == nil {
		p, pl.ready = pl.ready[0], pl.ready[1:]
		if p.dead() {
			p.discard()
			p = nil
		}
	}
	pl.refillLocked()
	pl.mu.Unlock()
	if p != nil {
		return p, nil
	}
	return pl.start(ctx)
}

// start starts a child and waits until it is ready, within ctx.
func (pl *pool) start(ctx context.Context) (*proc, error) {
	// Counted before it exists, under mu, so Close never waits on a count
	// that could still grow.
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return nil, errClosed
	}
	pl.live.Add(1)
	pl.mu.Unlock()
	p, err := pl.s.spawn()
	if err != nil {
		pl.live.Done()
		return nil, err
	}
	go func() {
		<-p.exited
		pl.live.Done()
	}()
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// refillLocked starts children in the background until idle are ready
// or starting.
func (pl *pool) refillLocked() {
	for ; !pl.closed && len(pl.ready)+pl.starting < pl.idle; pl.starting++ {
		go pl.prestart()
	}
}

// prestart starts one child ahead and adds it to the ready ones; a child
// that fails to start is dropped (the next run starts its own and reports
// why it cannot).
func (pl *pool) prestart() {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	p, err := pl.start(ctx)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.starting--
	if err != nil {
		return
	}
	if pl.closed {
		p.discard()
		return
	}
	pl.ready = append(pl.ready, p)
}

// fill starts children ahead without waiting for them.
func (pl *pool) fill() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.refillLocked()
}

// close ends the ready children and waits until every child, running
// ones included (they end at their run's bounds), is reaped.
func (pl *pool) close() {
	pl.mu.Lock()
	pl.closed = true
	for _, p := range pl.ready {
		p.discard()
	}
	pl.ready = nil
	pl.mu.Unlock()
	pl.live.Wait()
}

// pids are the process ids of the ready children, for tests.
func (pl *pool) pids() []int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	ids := make([]int, len(pl.ready))
	for i, p := range pl.ready {
		ids[i] = p.cmd.Process.Pid
	}
	return ids
}
