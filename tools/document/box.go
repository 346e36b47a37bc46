package document

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Limits bound one extraction in the box.
type Limits struct {
	// CPU is the CPU time the child may use (whole seconds, at least 1):
	// a parser that loops stops here.
	CPU time.Duration `json:"cpu"`
	// Wall is how long the parent waits for the text before it kills the
	// child: a child that sleeps or is starved stops here.
	Wall time.Duration `json:"wall"`
	// MemoryBytes is the memory the child may take beyond what it holds
	// when the file has arrived (the file itself included): its heap may
	// grow by half of it, and its address space is capped at what it maps
	// plus all of it.
	MemoryBytes int64 `json:"memoryBytes"`
}

// DefaultLimits are the bounds of an extraction: a 20 MB PDF of 1,000
// pages takes under 1 s of CPU and 165 MB of memory. The wall time is the
// generous one (a loaded machine stretches a CPU-second), so a parser's
// loop ends at the CPU limit, named for it.
var DefaultLimits = Limits{CPU: 10 * time.Second, Wall: 60 * time.Second, MemoryBytes: 512 << 20}

// MaxConcurrent is how many extractions one Box runs at once; more wait.
const MaxConcurrent = 2

// maxOutputBytes bounds the text a child may send back: MaxTextChars
// characters of at most four bytes each.
const maxOutputBytes = 4 * MaxTextChars

// Box extracts files in child processes of the same binary, each bounded
// in CPU time, memory and wall time, so a file that sends a parser into
// a loop or a memory bomb ends the child, never the server. Use NewBox or
// DefaultBox.
type Box struct {
	// Path and Args start a child; its environment holds only ChildEnv.
	Path string
	Args []string
	// Limits bound each extraction.
	Limits Limits

	once  sync.Once
	slots chan struct{}
	// started, when set, is told each child's process id (tests).
	started func(pid int)
}

// NewBox returns a box whose children are started as path args...,
// bounded by DefaultLimits.
func NewBox(path string, args ...string) *Box {
	return &Box{Path: path, Args: args, Limits: DefaultLimits}
}

// DefaultBox returns the box of the running binary: its hidden `extract`
// command (a test binary serves it from TestMain, see ServeChildIfAsked).
func DefaultBox() (*Box, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the extraction binary: %w", err)
	}
	return NewBox(exe, "extract"), nil
}

// Extract returns the text of a file of format mimeType, as Extract does,
// read in a child process. A file that cannot be read, or whose reading
// passes a bound, is an *Unreadable error naming why (the bound: "passed
// its 10 s CPU limit"); a cancelled ctx kills the child at once and is
// returned as it is. Other errors (the child could not be started) are
// worth trying again.
func (b *Box) Extract(ctx context.Context, mimeType string, data []byte) (string, error) {
	if os.Getenv(ChildEnv) == "1" {
		// A binary that does not serve the box would start itself again and
		// again: its child refuses to go on.
		return "", errors.New("extract in a box: this process is an extraction child that did not serve the box (call document.ServeChildIfAsked first in main or TestMain)")
	}
	b.once.Do(func() { b.slots = make(chan struct{}, MaxConcurrent) })
	select {
	case b.slots <- struct{}{}:
		defer func() { <-b.slots }()
	case <-ctx.Done():
		return "", fmt.Errorf("wait for the extraction box: %w", ctx.Err())
	}
	// A limit left unset is the default one; CPU time is capped in whole
	// seconds.
	lim := b.Limits
	if lim.CPU <= 0 {
		lim.CPU = DefaultLimits.CPU
	}
	if lim.Wall <= 0 {
		lim.Wall = DefaultLimits.Wall
	}
	if lim.MemoryBytes <= 0 {
		lim.MemoryBytes = DefaultLimits.MemoryBytes
	}
	lim.CPU = max(lim.CPU.Round(time.Second), time.Second)

	cmd := exec.Command(b.Path, b.Args...)
	cmd.Env = []string{ChildEnv + "=1"}
	cmd.Dir = os.TempDir()
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", fmt.Errorf("start the extraction box: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("start the extraction box: %w", err)
	}
	stderr := &headLog{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start the extraction box: %w", err)
	}
	if b.started != nil {
		b.started(cmd.Process.Pid)
	}

	// The file goes in while the answer is read: a child that dies early
	// ends the write with EPIPE.
	go func() {
		w := bufio.NewWriterSize(stdin, 64<<10)
		hdr, _ := json.Marshal(request{MIME: mimeType, Size: len(data), Limits: lim})
		_, _ = w.Write(append(hdr, '\n'))
		_, _ = w.Write(data)
		_ = w.Flush()
		_ = stdin.Close()
	}()
	type answer struct {
		started bool
		r       response
		text    string
		err     error
	}
	got := make(chan answer, 1)
	go func() {
		var a answer
		a.started, a.r, a.text, a.err = readAnswer(bufio.NewReaderSize(stdout, 64<<10))
		got <- a
	}()

	wall := time.NewTimer(lim.Wall)
	defer wall.Stop()
	var (
		a        answer
		timedOut bool
	)
	select {
	case a = <-got:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		a = <-got
	case <-wall.C:
		timedOut = true
		_ = cmd.Process.Kill()
		a = <-got
	}
	if a.err != nil || !a.r.Done {
		// No answer: the child is ended, so the read above has ended too.
		_ = cmd.Process.Kill()
	}
	waitErr := cmd.Wait()
	switch {
	case a.err == nil && a.r.Done:
		if a.r.Reason != "" {
			return "", &Unreadable{Reason: a.r.Reason}
		}
		if a.r.Error != "" {
			return "", fmt.Errorf("extract in a box: %s", a.r.Error)
		}
		return a.text, nil
	case ctx.Err() != nil:
		return "", fmt.Errorf("extract in a box: %w", ctx.Err())
	case !a.started:
		// Not the file's doing: no byte of it was parsed.
		return "", fmt.Errorf("start the extraction box (does %s serve it?): %v (%v): %s", b.Path, a.err, waitErr, stderr.first(300))
	case timedOut:
		return "", unreadable("extraction exceeded its %s time limit and was stopped (a malformed or hostile file)", seconds(lim.Wall))
	case errors.Is(a.err, errOutput):
		return "", unreadable("extraction produced more than %d bytes of text", maxOutputBytes)
	case exitCode(waitErr) == exitCPU || cpuSpent(cmd) >= lim.CPU:
		return "", unreadable("extraction exceeded its %s CPU limit and was stopped (a malformed or hostile file)", seconds(lim.CPU))
	case exitCode(waitErr) == exitMemory || stderr.has("out of memory") || stderr.has("cannot allocate memory") ||
		stderr.has("failed to allocate") || stderr.has("address space collisions"):
		return "", unreadable("extraction exceeded its %d MiB memory limit and was stopped (a malformed or hostile file)", lim.MemoryBytes>>20)
	case stderr.has("stack overflow") || stderr.has("stack exceeds"):
		return "", unreadable("extraction failed: the file nests too deeply to read")
	default:
		// The child took the file and died of it: trying again would die
		// the same way.
		return "", unreadable("extraction failed: the reader crashed on this file (%v)", waitErr)
	}
}

// errOutput is a child that sent more text than any file may yield.
var errOutput = errors.New("the extraction box sent too much text")

// readAnswer reads the child's messages: that it started, then how it
// ended, then the text.
func readAnswer(r *bufio.Reader) (started bool, resp response, text string, err error) {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return started, response{}, "", fmt.Errorf("read the extraction box: %w", err)
		}
		var m response
		if err := json.Unmarshal(line, &m); err != nil {
			return started, response{}, "", fmt.Errorf("read the extraction box: not its protocol: %.80q", line)
		}
		switch {
		case m.Started:
			started = true
		case m.Done:
			if m.Size < 0 || m.Size > maxOutputBytes {
				return started, response{}, "", errOutput
			}
			buf := make([]byte, m.Size)
			if _, err := io.ReadFull(r, buf); err != nil {
				return started, response{}, "", fmt.Errorf("read the extraction box's text: %w", err)
			}
			return started, m, string(buf), nil
		default:
			return started, response{}, "", fmt.Errorf("read the extraction box: unexpected %.80q", line)
		}
	}
}

// seconds writes a bound as the reason names it: "10 s".
func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}

// exitCode is how a child exited: -1 when it was killed by a signal (or
// did not exit).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// cpuSpent is the CPU time an exited child used.
func cpuSpent(cmd *exec.Cmd) time.Duration {
	if cmd.ProcessState == nil {
		return 0
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// headLog keeps the first 16 KiB a child wrote to stderr: a Go runtime
// crash writes its reason first, then every goroutine's stack.
type headLog struct {
	mu   sync.Mutex
	head []byte
}

func (h *headLog) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := min(16<<10-len(h.head), len(p)); n > 0 {
		h.head = append(h.head, p[:n]...)
	}
	return len(p), nil
}

func (h *headLog) has(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return bytes.Contains(h.head, []byte(s))
}

func (h *headLog) first(n int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := bytes.TrimSpace(h.head)
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "")
}
