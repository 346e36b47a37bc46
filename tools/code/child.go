package code

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// ChildEnv set to "1" in a process's environment makes it a sandbox
// child: the only variable the parent passes it.
const ChildEnv = "TOOLGATE_SANDBOX"

// ServeChildIfAsked runs the sandbox child and exits when the process was
// started as one (ChildEnv is set), and returns otherwise. Test binaries
// call it first in TestMain, so a test's sandbox can re-execute its own
// binary; the toolgate binary runs the child as `toolgate sandbox`.
func ServeChildIfAsked() {
	if os.Getenv(ChildEnv) != "1" {
		return
	}
	if err := ServeChild(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ServeChild runs one job. Started ahead of its run, it first readies an
// interpreter (the standard objects hardened, console and workspace
// installed) and says so; then it reads the job from in, caps itself, says
// it started, runs the code, and writes the run's messages to out, reading
// the answers to workspace calls from in. It is the child's whole life:
// one job, then the process exits. An input closed before any job (an
// unused child of a pool being closed) ends it quietly.
func ServeChild(in io.Reader, out io.Writer) error {
	c := &child{dec: json.NewDecoder(bufio.NewReaderSize(in, 64<<10)), w: bufio.NewWriterSize(out, 64<<10)}
	c.enc = json.NewEncoder(c.w)
	if err := c.prepare(); err != nil {
		return fmt.Errorf("ready the interpreter: %w", err)
	}
	if err := c.send(message{Ready: true}); err != nil {
		return fmt.Errorf("say ready: %w", err)
	}
	var j job
	if err := c.dec.Decode(&j); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("read job: %w", err)
	}
	// The address-space cap first: nothing the code does may pass it.
	if err := limitProcess(j.Limits); err != nil {
		return fmt.Errorf("limit process: %w", err)
	}
	c.limits = j.Limits
	if err := c.send(message{Started: true}); err != nil {
		return fmt.Errorf("say started: %w", err)
	}
	return c.send(c.run(j))
}

// send writes a message, after any output not yet sent.
func (c *child) send(m message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
	if c.werr != nil {
		return c.werr
	}
	if err := c.enc.Encode(m); err != nil {
		return err
	}
	return c.w.Flush()
}

// stop is why a run was interrupted: a bound it hit.
type stop struct {
	bound string
	msg   string
}

func (s *stop) Error() string { return s.msg }

type child struct {
	dec    *json.Decoder
	limits Limits
	vm     *goja.Runtime

	// mu guards the writer and the output not yet sent: the flusher sends
	// output while the code runs, so a child killed mid-run has already
	// reported most of what it printed.
	mu      sync.Mutex
	w       *bufio.Writer
	enc     *json.Encoder
	pending strings.Builder
	printed int
	flushed time.Time
	werr    error
}

// flushInterval is how often printed output is sent while code runs.
const flushInterval = 50 * time.Millisecond

// prepare readies the interpreter before the job is known: what costs
// time (the hardening prelude) is done while the child waits.
func (c *child) prepare() error {
	c.vm = goja.New()
	return c.install()
}

// run runs the job's code and says how it ended.
func (c *child) run(j job) message {
	c.vm.SetTimeSource(func() time.Time { return j.Now })
	c.vm.SetMaxCallStackSize(c.limits.CallDepth)
	if err := c.results(j.ToolResults); err != nil {
		return message{Done: true, Error: "set up the sandbox: " + err.Error()}
	}
	prog, err := goja.Compile("code.js", j.Code, true)
	if err != nil {
		return message{Done: true, Error: err.Error()}
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.flusher(done)
	}()
	go func() {
		defer wg.Done()
		c.watch(done)
	}()
	_, err = c.vm.RunProgram(prog)
	close(done)
	wg.Wait()

	if err == nil {
		return message{Done: true}
	}
	var (
		interrupted *goja.InterruptedError
		overflow    *goja.StackOverflowError
		exception   *goja.Exception
	)
	switch {
	case errors.As(err, &interrupted):
		if s, ok := interrupted.Value().(*stop); ok {
			return message{Done: true, Bound: s.bound, Error: s.msg}
		}
		return message{Done: true, Error: fmt.Sprint(interrupted.Value())}
	case errors.As(err, &overflow):
		return message{Done: true, Bound: BoundCallDepth,
			Error: fmt.Sprintf("calls nested deeper than %d (runaway recursion?)", c.limits.CallDepth)}
	case errors.As(err, &exception):
		return message{Done: true, Error: explain(exception)}
	default:
		return message{Done: true, Error: err.Error()}
	}
}

// explain is a thrown error as the model reads it, with a word on what the
// sandbox lacks when the code reached for it.
func explain(e *goja.Exception) string {
	msg := strings.TrimSpace(e.Error())
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	if strings.HasPrefix(msg, "ReferenceError:") {
		msg += " (run_code has no require, fetch, process or timers: only standard JavaScript, toolResults, workspace and console)"
	}
	return msg
}

// interrupt stops the code at its next step with a bound's error.
func (c *child) interrupt(bound, format string, args ...any) {
	c.vm.Interrupt(&stop{bound: bound, msg: fmt.Sprintf(format, args...)})
}

// flusher sends printed output every flushInterval until done.
func (c *child) flusher(done <-chan struct{}) {
	t := time.NewTicker(flushInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			c.mu.Lock()
			c.flushLocked()
			c.mu.Unlock()
		}
	}
}

// watch interrupts the code at the wall-time bound, or when its heap
// passes the memory bound's soft line, checked every few milliseconds. A
// single allocation past the address-space cap is stopped by the cap.
func (c *child) watch(done <-chan struct{}) {
	deadline := time.NewTimer(c.limits.Wall)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for {
		select {
		case <-done:
			return
		case <-deadline.C:
			c.interrupt(BoundTime, "ran past the %s time bound (an endless loop?)", c.limits.Wall)
			return
		case <-tick.C:
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && int64(sample[0].Value.Uint64()) > heapLine(c.limits.MemoryBytes) {
				c.interrupt(BoundMemory, "used too much memory (the bound is %d MiB)", c.limits.MemoryBytes>>20)
				return
			}
		}
	}
}

// print adds a line of console output, up to the output bound.
func (c *child) print(call goja.FunctionCall) goja.Value {
	parts := make([]string, len(call.Arguments))
	for i, a := range call.Arguments {
		parts[i] = c.show(a)
	}
	line := strings.Join(parts, " ") + "\n"
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limits.OutputBytes - c.printed
	if len(line) > room {
		cut := line[:max(room, 0)]
		for len(cut) > 0 && !utf8.ValidString(cut) {
			cut = cut[:len(cut)-1]
		}
		c.pending.WriteString(cut)
		c.printed += len(cut)
		c.interrupt(BoundOutput, "printed more than %d bytes", c.limits.OutputBytes)
		return goja.Undefined()
	}
	c.pending.WriteString(line)
	c.printed += len(line)
	// Sent at once unless the code prints fast (then the flusher sends it
	// in batches): a child that dies next has already told what it printed.
	if now := time.Now(); c.pending.Len() >= 32<<10 || now.Sub(c.flushed) > time.Millisecond {
		c.flushLocked()
	}
	return goja.Undefined()
}

// show is how console.log writes a value: strings as they are, objects
// and arrays as JSON, anything else as JavaScript converts it.
func (c *child) show(v goja.Value) string {
	if o, ok := v.(*goja.Object); ok {
		if _, isFunc := goja.AssertFunction(o); !isFunc {
			if b, err := o.MarshalJSON(); err == nil {
				return string(b)
			}
		}
	}
	return v.String()
}

func (c *child) flushLocked() {
	if c.pending.Len() == 0 || c.werr != nil {
		return
	}
	c.werr = c.enc.Encode(message{Out: c.pending.String()})
	if c.werr == nil {
		c.werr = c.w.Flush()
	}
	c.pending.Reset()
	c.flushed = time.Now()
}

// call makes a workspace call on the parent and returns its answer. A
// refused call throws in the code, which may catch it; a bound stops the
// run.
func (c *child) call(m message) goja.Value {
	c.mu.Lock()
	c.flushLocked()
	if c.werr == nil {
		c.werr = c.enc.Encode(m)
	}
	if c.werr == nil {
		c.werr = c.w.Flush()
	}
	err := c.werr
	c.mu.Unlock()
	if err != nil {
		panic(c.vm.NewGoError(fmt.Errorf("reach the workspace: %w", err)))
	}
	var r reply
	if err := c.dec.Decode(&r); err != nil {
		panic(c.vm.NewGoError(fmt.Errorf("reach the workspace: %w", err)))
	}
	switch {
	case r.Bound != "":
		c.interrupt(r.Bound, "%s", r.Error)
		return goja.Undefined()
	case r.Error != "":
		panic(c.vm.NewGoError(errors.New(r.Error)))
	}
	var v any
	if err := json.Unmarshal(r.Value, &v); err != nil {
		panic(c.vm.NewGoError(fmt.Errorf("read the workspace's answer: %w", err)))
	}
	return c.vm.ToValue(v)
}

// install sets the globals the code sees but toolResults (workspace and
// console), then hardens the standard objects (see prelude).
func (c *child) install() error {
	vm := c.vm
	ws := vm.NewObject()
	for name, fn := range map[string]func(goja.FunctionCall) goja.Value{
		"read": func(call goja.FunctionCall) goja.Value {
			return c.call(message{Op: "read", Path: call.Argument(0).String()})
		},
		"write": func(call goja.FunctionCall) goja.Value {
			if len(call.Arguments) < 2 {
				panic(vm.NewTypeError("workspace.write(path, text) takes a path and a text"))
			}
			return c.call(message{Op: "write", Path: call.Argument(0).String(), Text: call.Argument(1).String()})
		},
		"list": func(goja.FunctionCall) goja.Value { return c.call(message{Op: "list"}) },
	} {
		if err := ws.Set(name, fn); err != nil {
			return err
		}
	}
	console := vm.NewObject()
	for _, name := range []string{"log", "info", "warn", "error", "debug"} {
		if err := console.Set(name, c.print); err != nil {
			return err
		}
	}
	for name, v := range map[string]any{"workspace": ws, "console": console} {
		if err := vm.Set(name, v); err != nil {
			return err
		}
	}
	_, err := vm.RunString(prelude)
	return err
}

// results sets toolResults, frozen like the globals the prelude froze.
func (c *child) results(texts []string) error {
	trs := make([]any, len(texts))
	for i, t := range texts {
		trs[i] = t
	}
	if err := c.vm.Set("toolResults", c.vm.NewArray(trs...)); err != nil {
		return err
	}
	_, err := c.vm.RunString(`Object.freeze(toolResults)`)
	return err
}

// prelude hardens the standard objects, as SES does: every global's
// constructor and prototype is frozen, so code cannot plant anything on
// them (a fresh process per run keeps runs apart anyway; this makes the
// attempt itself an error). Object.prototype's methods become accessors
// that let an object take an own property of the same name, so
// `counts["constructor"] = 1` still works on a frozen prototype.
const prelude = `(function () {
  "use strict";
  const proto = Object.prototype;
  for (const name of Object.getOwnPropertyNames(proto)) {
    const d = Object.getOwnPropertyDescriptor(proto, name);
    if (!("value" in d) || !d.writable) continue;
    const value = d.value;
    Object.defineProperty(proto, name, {
      get() { return value; },
      set(v) {
        if (this === proto) throw new TypeError("Cannot assign to read only property '" + name + "' of Object.prototype");
        Object.defineProperty(this, name, {value: v, writable: true, enumerable: true, configurable: true});
      },
      enumerable: d.enumerable, configurable: false,
    });
  }
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    const v = globalThis[name];
    if (v === null || (typeof v !== "object" && typeof v !== "function") || v === globalThis) continue;
    if (typeof v === "function" && v.prototype) Object.freeze(v.prototype);
    Object.freeze(v);
  }
  for (const f of [function* () {}, async function () {}]) {
    Object.freeze(Object.getPrototypeOf(f));
  }
  Object.freeze(Object.getPrototypeOf([][Symbol.iterator]()));
  Object.freeze(Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())));
})();`

// heapLine is where the watchdog interrupts, as a share of the memory
// bound: the rest is headroom for the interpreter, the job and the GC.
func heapLine(memory int64) int64 { return memory / 2 }
