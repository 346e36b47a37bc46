package document_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/document/documenttest"
)

// testBox is the box of this test binary (TestMain serves it) with lim.
func testBox(t *testing.T, lim document.Limits) *document.Box {
	t.Helper()
	b, err := document.DefaultBox()
	require.NoError(t, err)
	b.Limits = lim
	return b
}

// reason is the reason of an *Unreadable err, failing the test when err
// is not one.
func reason(t *testing.T, err error) string {
	t.Helper()
	var bad *document.Unreadable
	require.True(t, errors.As(err, &bad), "want an unreadable file, got %v", err)
	return bad.Reason
}

// The box reads what Extract reads, and passes on why a file cannot be
// read.
func TestBoxExtracts(t *testing.T) {
	t.Parallel()
	b := testBox(t, document.DefaultLimits)
	ctx := context.Background()
	text, err := b.Extract(ctx, document.MIMEPDF, documenttest.PDF([]string{"Quarterly revenue grew."}, []string{"Page two text."}))
	require.NoError(t, err)
	require.Contains(t, text, "Quarterly revenue grew.")
	require.Contains(t, text, "Page two text.")
	text, err = b.Extract(ctx, document.MIMEDOCX, documenttest.DOCX("Expenses are reimbursed monthly.", "Ünïcode ✓"))
	require.NoError(t, err)
	require.Equal(t, "Expenses are reimbursed monthly.\nÜnïcode ✓", text)
	_, err = b.Extract(ctx, document.MIMEPDF, documenttest.EncryptedPDF())
	require.Contains(t, reason(t, err), "the PDF is encrypted")
}

// The hostile files of the report (a trailer whose /Prev is its own
// cross-reference table, a page that is its own /Parent, two million
// nested paragraphs in 32 KB) each fail at once, in process and in the
// box, with a reason that says what is wrong.
func TestHostileFilesFailFast(t *testing.T) {
	t.Parallel()
	deep := documenttest.DeepDOCX(2_000_000)
	require.Less(t, len(deep), 40<<10)
	files := []struct {
		name, mime string
		data       []byte
		reason     string
	}{
		{"own prev", document.MIMEPDF, documenttest.PrevLoopPDF(), "cross-reference sections loop"},
		{"own parent", document.MIMEPDF, documenttest.OwnParentPDF(), "page 1's /Parent chain loops"},
		{"deep docx", document.MIMEDOCX, deep, "nest more than 256 deep"},
	}
	b := testBox(t, document.DefaultLimits)
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			require.Less(t, len(f.data), 40<<10)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.Contains(t, reason(t, within(t, 10*time.Second, func() error {
				_, err := document.Extract(ctx, f.mime, f.data)
				return err
			})), f.reason)
			start := time.Now()
			_, err := b.Extract(ctx, f.mime, f.data)
			require.Contains(t, reason(t, err), f.reason)
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

// A loop no check of toolgate's knows (an object stream that /Extends
// itself) stops in process when the context ends, since every read of the
// file looks at it.
func TestExtractStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, within(t, 10*time.Second, func() error {
		_, err := document.Extract(ctx, document.MIMEPDF, documenttest.ExtendsLoopPDF())
		return err
	}), context.DeadlineExceeded)
}

// within runs f and returns its error, failing the test when f has not
// returned after d (a reader in a loop: it is left running).
func within(t *testing.T, d time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still reading after %s", d)
		return nil
	}
}

// What the checks miss, the box's bounds stop: each ends the child and
// names itself, and the file is unreadable (not worth trying again).
func TestBoxBounds(t *testing.T) {
	t.Parallel()
	loop := documenttest.ExtendsLoopPDF()
	// 18 MB of text (4.5 million characters): reading it copies it, and
	// the heap grows past 16 MiB.
	big := []byte(strings.Repeat("𝄞", 4_500_000))
	tests := []struct {
		name   string
		lim    document.Limits
		mime   string
		data   []byte
		reason string
	}{
		{"cpu", document.Limits{CPU: time.Second, Wall: 60 * time.Second, MemoryBytes: 512 << 20}, document.MIMEPDF, loop,
			"extraction exceeded its 1 s CPU limit"},
		{"wall", document.Limits{CPU: 60 * time.Second, Wall: time.Second, MemoryBytes: 512 << 20}, document.MIMEPDF, loop,
			"extraction exceeded its 1 s time limit"},
		{"memory", document.Limits{CPU: 60 * time.Second, Wall: 60 * time.Second, MemoryBytes: 32 << 20}, document.MIMEText, big,
			"extraction exceeded its 32 MiB memory limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := testBox(t, tt.lim).Extract(context.Background(), tt.mime, tt.data)
			require.Contains(t, reason(t, err), tt.reason)
			require.Less(t, time.Since(start), 30*time.Second)
		})
	}
	// The same text reads within the default bounds.
	text, err := testBox(t, document.DefaultLimits).Extract(context.Background(), document.MIMEText, big)
	require.NoError(t, err)
	require.Len(t, text, 18_000_000)
}

// Cancelling the context kills the child at once: shutdown is not held by
// a file being read.
func TestBoxCancelKillsTheChild(t *testing.T) {
	t.Parallel()
	b := testBox(t, document.DefaultLimits)
	var pid atomic.Int64
	document.OnStart(b, func(p int) { pid.Store(int64(p)) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.Extract(ctx, document.MIMEPDF, documenttest.ExtendsLoopPDF())
		done <- err
	}()
	require.Eventually(t, func() bool { return pid.Load() != 0 }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // well into its loop
	require.NoError(t, syscall.Kill(int(pid.Load()), 0), "the child runs")
	cancel()
	cancelled := time.Now()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(cancelled), time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("Extract did not return after its context was cancelled")
	}
	// Reaped: no such process.
	require.ErrorIs(t, syscall.Kill(int(pid.Load()), 0), syscall.ESRCH)
}
