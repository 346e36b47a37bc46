package document

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"time"
)

// The box speaks over the child's stdin and stdout: the parent sends a
// request (one JSON line) and the file's bytes; the child reads them, caps
// itself, says it started (no byte of the file has been parsed yet), and
// answers with one JSON line, followed by the text when there is one.

// request is what the parent sends before the file.
type request struct {
	MIME   string `json:"mime"`
	Size   int    `json:"size"`
	Limits Limits `json:"limits"`
}

// response is one message of the child.
type response struct {
	Started bool `json:"started,omitempty"`
	// Done ends the extraction: Reason is why the file cannot be read,
	// Error another failure, else Size bytes of text follow.
	Done   bool   `json:"done,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	Size   int    `json:"size,omitempty"`
}

// ChildEnv set to "1" in a process's environment makes it an extraction
// child: the only variable the parent passes it.
const ChildEnv = "TOOLGATE_EXTRACT"

// The exit codes of a child that hit a bound it watches itself.
const (
	exitCPU    = 3
	exitMemory = 4
)

// childMaxStack bounds the child's goroutine stacks, so a parser's runaway
// recursion ends as a stack overflow, not as the memory limit.
const childMaxStack = 64 << 20

// ServeChildIfAsked runs the extraction child and exits when the process
// was started as one (ChildEnv is set), and returns otherwise. Test
// binaries whose tests extract documents call it first in TestMain, so the
// box can re-execute their own binary; the toolgate binary serves it as
// `toolgate extract`.
func ServeChildIfAsked() {
	if os.Getenv(ChildEnv) != "1" {
		return
	}
	if err := ServeChild(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ServeChild extracts one file: it reads the request and the file from
// in, caps its own CPU time and address space, watches its heap, extracts,
// and writes the answer to out. It is the child's whole life.
func ServeChild(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	line, err := r.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		return fmt.Errorf("read the request: %w", err)
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	if req.Size < 0 {
		return errors.New("read the request: negative size")
	}
	data := make([]byte, req.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("read the file: %w", err)
	}
	// The caps first: no byte of the file is parsed before them.
	xcpu := make(chan os.Signal, 1)
	signal.Notify(xcpu, syscall.SIGXCPU)
	go func() {
		<-xcpu
		os.Exit(exitCPU)
	}()
	debug.SetMaxStack(childMaxStack)
	if err := limitProcess(req.Limits); err != nil {
		return fmt.Errorf("limit the process: %w", err)
	}
	go watchHeap(heapNow() + req.Limits.MemoryBytes/2)

	w := bufio.NewWriterSize(out, 64<<10)
	send := func(m response) error {
		b, _ := json.Marshal(m)
		_, err := w.Write(append(b, '\n'))
		return err
	}
	if err := send(response{Started: true}); err != nil {
		return fmt.Errorf("say started: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("say started: %w", err)
	}
	text, err := Extract(context.Background(), req.MIME, data)
	var bad *Unreadable
	switch {
	case errors.As(err, &bad):
		err = send(response{Done: true, Reason: bad.Reason})
	case err != nil:
		err = send(response{Done: true, Error: err.Error()})
	default:
		if err = send(response{Done: true, Size: len(text)}); err == nil {
			_, err = io.WriteString(w, text)
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return fmt.Errorf("send the text: %w", err)
	}
	return nil
}

// watchHeap ends the child once its heap passes line bytes, checked every
// few milliseconds: a file that makes the parser hold more than that stops
// here, named, before the address-space cap ends it less clearly.
func watchHeap(line int64) {
	for range time.Tick(5 * time.Millisecond) {
		if heapNow() > line {
			os.Exit(exitMemory)
		}
	}
}

// heapNow is the bytes of the heap's objects, garbage not yet collected
// included.
func heapNow() int64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}
