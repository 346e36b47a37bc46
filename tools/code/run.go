package code

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/workspace"
)

// Sandbox runs code in child processes. Use New or Default.
type Sandbox struct {
	// Path and Args start a child; the child's environment holds only
	// ChildEnv.
	Path string
	Args []string
	// Limits bound each run.
	Limits Limits
	// Idle is how many children are kept started ahead, ready for a run
	// (each serves one run, then is replaced in the background); 0 starts
	// a child for each run. Read at the first run.
	Idle int
	// grace is how long past Limits.Wall the parent waits for the child
	// to stop itself before it kills it.
	grace time.Duration
	slots chan struct{}
	once  sync.Once
	pl    *pool
}

// New returns a sandbox whose children are started as path args...,
// bounded by DefaultLimits, with DefaultIdle children kept ready once it
// has run (or Prestart was called). Close ends them.
func New(path string, args ...string) *Sandbox {
	return &Sandbox{Path: path, Args: args, Limits: DefaultLimits, Idle: DefaultIdle, grace: 2 * time.Second,
		slots: make(chan struct{}, MaxConcurrent)}
}

func (s *Sandbox) pool() *pool {
	s.once.Do(func() { s.pl = &pool{s: s, idle: s.Idle} })
	return s.pl
}

// Prestart starts the idle children now, without waiting for them, so the
// first run is as quick as the next ones.
func (s *Sandbox) Prestart() { s.pool().fill() }

// Close ends the idle children and waits until every child, running ones
// included (they end within their run's bounds), has exited. Runs asked
// for after Close fail.
func (s *Sandbox) Close() error {
	s.pool().close()
	return nil
}

// Default returns the sandbox of the running binary: its hidden
// `sandbox` command.
func Default() (*Sandbox, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the sandbox binary: %w", err)
	}
	return New(exe, "sandbox"), nil
}

// Input is one run_code call.
type Input struct {
	Code string
	// ToolResults are refs of the conversation's stored results.
	ToolResults []string
	// Now is the only time the code can read: the turn's.
	Now time.Time
}

// Result is what run_code answers: what the code printed, and the files
// it wrote. Nothing printed and nothing written is an absence.
type Result struct {
	Output string              `json:"output"`
	Files  []workspace.Written `json:"files"`
}

// Run runs in.Code over the conversation's stored results and workspace,
// through the caller's scoped client (not a transaction: the writes are
// committed in one of their own, after the code has finished). Refs are
// checked before any code runs. A run that fails or hits a bound writes
// nothing, and its error names the bound and quotes what it printed.
func (s *Sandbox) Run(ctx context.Context, client *ent.Client, conversationID int, in Input) (*Result, error) {
	switch {
	case strings.TrimSpace(in.Code) == "":
		return nil, tools.Refusef("code is empty: write JavaScript that console.logs its answer")
	case utf8.RuneCountInString(in.Code) > MaxCodeChars:
		return nil, tools.Refusef("code is %d characters: the limit is %d", utf8.RuneCountInString(in.Code), MaxCodeChars)
	case len(in.ToolResults) > MaxToolResults:
		return nil, tools.Refusef("toolResults: give at most %d refs, not %d", MaxToolResults, len(in.ToolResults))
	}
	ws := workspace.New(client, conversationID)
	texts := make([]string, len(in.ToolResults))
	for i, ref := range in.ToolResults {
		sr, err := ws.Whole(ctx, ref, "passed to run_code")
		if err != nil {
			var refusal *tools.Refusal
			if errors.As(err, &refusal) {
				return nil, tools.Refusef("toolResults[%d] (ref %q): %v; no code ran", i, ref, err)
			}
			return nil, err
		}
		texts[i] = strings.ToValidUTF8(string(sr.Content), "\uFFFD")
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a sandbox: %w", ctx.Err())
	}
	r := &run{ws: ws, limits: s.Limits}
	j := job{Code: in.Code, ToolResults: texts, Now: in.Now, Limits: s.Limits}
	end, err := s.start(ctx, r, j)
	// A child that died before it took the job ran nothing: the run goes
	// to another.
	for attempt := 1; errors.Is(err, errUnstarted) && attempt < startAttempts && ctx.Err() == nil; attempt++ {
		end, err = s.start(ctx, r, j)
	}
	if err != nil {
		return nil, err
	}
	if end.Error != "" {
		return nil, r.failure(end)
	}
	tx, err := client.Tx(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin workspace writes: %w", err)
	}
	written, err := workspace.New(tx.Client(), conversationID).Commit(ctx, r.writes)
	if err != nil {
		_ = tx.Rollback()
		var refusal *tools.Refusal
		if errors.As(err, &refusal) {
			return nil, r.failure(message{Error: "the code ran, but its workspace writes were refused: " + err.Error()})
		}
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit workspace writes: %w", err)
	}
	return &Result{Output: r.out.String(), Files: written.Files}, nil
}

// run is the parent's side of one run: what the code printed and the
// writes it made, kept until it ends.
type run struct {
	ws     *workspace.Workspace
	limits Limits
	out    strings.Builder
	writes []workspace.Content
}

// errUnstarted is a child that ended before it took its job: no code ran.
var errUnstarted = errors.New("the sandbox ended before it took the job")

// startAttempts is how many children a run is offered before it fails,
// when each ends before taking it.
const startAttempts = 3

// start runs the job on a ready child and returns the child's last
// message; the child is ended after it, whatever happened. A child that
// dies without a last message (killed at the wall bound, out of its
// address space) gets one made up from how it died; one that died before
// it took the job is errUnstarted.
func (s *Sandbox) start(ctx context.Context, r *run, j job) (message, error) {
	runCtx, cancel := context.WithTimeout(ctx, s.Limits.Wall+s.grace)
	defer cancel()
	p, err := s.pool().take(runCtx)
	if err != nil {
		if ctx.Err() != nil {
			return message{}, fmt.Errorf("run code: %w", ctx.Err())
		}
		return message{}, err
	}
	stop := context.AfterFunc(runCtx, p.kill)
	end, talked, started := r.talk(ctx, p, j)
	stop()
	if talked {
		// Its last word is in: the child is ended and reaped in the
		// background (Close waits for it).
		p.discard()
		return end, nil
	}
	<-p.exited
	p.release()
	stderr := p.stderr
	switch {
	case ctx.Err() != nil:
		return message{}, fmt.Errorf("run code: %w", ctx.Err())
	case runCtx.Err() != nil:
		return message{Bound: BoundTime, Error: fmt.Sprintf("ran past the %s time bound and was stopped", s.Limits.Wall)}, nil
	case !started:
		return message{}, fmt.Errorf("run code: %w (%v): %s", errUnstarted, p.waitErr, stderr.first(300))
	case stderr.has("out of memory") || stderr.has("cannot allocate memory") || stderr.has("address space collisions") ||
		stderr.has("failed to allocate"): // a race-detector build's allocator meeting the same cap
		return message{Bound: BoundMemory, Error: fmt.Sprintf("used too much memory (the bound is %d MiB) and was stopped", s.Limits.MemoryBytes>>20)}, nil
	case signalled(p.waitErr, syscall.SIGXCPU):
		return message{Bound: BoundTime, Error: "used up its CPU time and was stopped"}, nil
	case r.out.Len() > r.limits.OutputBytes:
		return message{Bound: BoundOutput, Error: fmt.Sprintf("printed more than %d bytes", r.limits.OutputBytes)}, nil
	default:
		return message{}, fmt.Errorf("run code: the sandbox stopped unexpectedly (%v): %s", p.waitErr, stderr.first(300))
	}
}

// talk sends the job and serves the child's messages until its last one;
// talked is false when the child ended without one, started whether it
// had said it took the job.
func (r *run) talk(ctx context.Context, p *proc, j job) (end message, talked, started bool) {
	w := bufio.NewWriterSize(p.stdin, 64<<10)
	enc := json.NewEncoder(w)
	if enc.Encode(j) != nil || w.Flush() != nil {
		return message{}, false, false
	}
	for {
		var m message
		if err := p.dec.Decode(&m); err != nil {
			return message{}, false, started
		}
		switch {
		case m.Started:
			started = true
		case m.Done:
			return m, true, true
		case m.Op != "":
			if enc.Encode(r.serve(ctx, m)) != nil || w.Flush() != nil {
				return message{}, false, started
			}
		default:
			// The child bounds its output; a child that does not is
			// stopped here.
			if r.out.Len()+len(m.Out) > r.limits.OutputBytes {
				r.out.WriteString(m.Out[:max(r.limits.OutputBytes-r.out.Len(), 0)])
				return message{Bound: BoundOutput, Error: fmt.Sprintf("printed more than %d bytes", r.limits.OutputBytes)}, true, true
			}
			r.out.WriteString(m.Out)
		}
	}
}

// serve answers one workspace call of the code.
func (r *run) serve(ctx context.Context, m message) reply {
	switch m.Op {
	case "read":
		p, err := workspace.CleanPath(m.Path)
		if err != nil {
			return reply{Error: err.Error()}
		}
		for i := len(r.writes) - 1; i >= 0; i-- {
			if r.writes[i].Path == p {
				return value(r.writes[i].Text)
			}
		}
		text, err := r.ws.Text(ctx, p)
		if err != nil {
			return reply{Error: err.Error()}
		}
		return value(text)
	case "write":
		if len(r.writes) >= r.limits.Writes {
			return reply{Bound: BoundWrites, Error: fmt.Sprintf("made more than %d workspace writes", r.limits.Writes)}
		}
		p, err := workspace.Check(m.Path, m.Text)
		if err != nil {
			return reply{Error: err.Error()}
		}
		r.writes = append(r.writes, workspace.Content{Path: p, Text: m.Text})
		return value(p)
	case "list":
		l, err := r.ws.List(ctx, nil)
		if err != nil {
			return reply{Error: "list the workspace: the database did not answer"}
		}
		type file struct {
			Path  string `json:"path"`
			Chars int    `json:"chars"`
			Bytes int    `json:"bytes"`
		}
		byPath := map[string]file{}
		for _, f := range l.Files {
			byPath[f.Path] = file{f.Path, f.Chars, f.Bytes}
		}
		for _, w := range r.writes {
			byPath[w.Path] = file{w.Path, utf8.RuneCountInString(w.Text), len(w.Text)}
		}
		files := make([]file, 0, len(byPath))
		for _, f := range byPath {
			files = append(files, f)
		}
		slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.Path, b.Path) })
		return value(files)
	default:
		return reply{Error: fmt.Sprintf("no workspace call %q", m.Op)}
	}
}

func value(v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		return reply{Error: err.Error()}
	}
	return reply{Value: b}
}

// failure is the error of a run that did not finish: the bound it hit or
// what the code threw, and the end of what it printed before.
func (r *run) failure(m message) error {
	var b strings.Builder
	if m.Bound != "" {
		fmt.Fprintf(&b, "run_code hit its %s bound: the code %s.", m.Bound, m.Error)
	} else {
		fmt.Fprintf(&b, "run_code failed: %s.", strings.TrimSuffix(m.Error, "."))
	}
	if len(r.writes) > 0 {
		fmt.Fprintf(&b, " None of its %d workspace writes was kept.", len(r.writes))
	}
	printed := r.out.String()
	switch {
	case printed == "":
		b.WriteString(" It printed nothing before.")
	case utf8.RuneCountInString(printed) <= quotedChars:
		fmt.Fprintf(&b, " Before that it printed:\n%s", printed)
	default:
		runes := []rune(printed)
		fmt.Fprintf(&b, " Before that it printed %d bytes, ending:\n…%s", len(printed), string(runes[len(runes)-quotedChars:]))
	}
	return tools.Failf("%s", b.String())
}

// stderrLog keeps the first and the last 16 KiB a child wrote to stderr: a
// Go runtime crash writes its reason first, then every goroutine's stack.
type stderrLog struct {
	mu         sync.Mutex
	head, tail []byte
}

const stderrKeep = 16 << 10

func (t *stderrLog) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := min(stderrKeep-len(t.head), len(p)); n > 0 {
		t.head = append(t.head, p[:n]...)
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > stderrKeep {
		t.tail = t.tail[len(t.tail)-stderrKeep:]
	}
	return len(p), nil
}

func (t *stderrLog) has(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Contains(t.head, []byte(s)) || bytes.Contains(t.tail, []byte(s))
}

// first is the start of what the child wrote: a crash's reason.
func (t *stderrLog) first(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := bytes.TrimSpace(t.head)
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "")
}

func signalled(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}
