package code_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/code"
)

// A run is never handed to a dead child: children started ahead that die
// while they wait are passed over, whether their death was noticed
// before the run took them or only when they did not take its job.
func TestRunSkipsDeadChildren(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	for _, reaped := range []bool{true, false} {
		b.sandbox.Prestart()
		waitReady(t, b.sandbox, code.DefaultIdle)
		pids := b.sandbox.ReadyPIDs()
		require.Len(t, pids, code.DefaultIdle)
		for _, pid := range pids {
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		}
		if reaped {
			require.Eventually(t, func() bool {
				for _, pid := range pids {
					if syscall.Kill(pid, 0) == nil {
						return false
					}
				}
				return true
			}, 10*time.Second, time.Millisecond)
		}
		res, err := b.run(t, `console.log("alive")`)
		require.NoError(t, err, "reaped: %v", reaped)
		require.Equal(t, "alive\n", res.Output)
	}
}

// A child that says it is ready, then dies with the job it was given, ran
// no code: the run goes to another child, up to three in all.
func TestRunRetriesChildThatDiesWithItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	dir := t.TempDir()
	// Each start is counted; the first (or every) one says it is ready,
	// reads its job and dies, the others are this test binary.
	const script = `echo start >> "$1/starts"
if [ "$3" = always ] || mkdir "$1/died" 2>/dev/null; then echo '{"ready":true}'; read -r job; exit 3; fi
exec "$2"`
	starts := func() int {
		raw, err := os.ReadFile(filepath.Join(dir, "starts"))
		require.NoError(t, err)
		return bytes.Count(raw, []byte("start"))
	}

	once := code.New("/bin/sh", "-c", script, "sh", dir, os.Args[0], "once")
	once.Idle = 0
	t.Cleanup(func() { require.NoError(t, once.Close()) })
	res, err := once.Run(tenancy.System(context.Background()), b.client, b.conv, codeInput(`console.log(6 * 7)`))
	require.NoError(t, err)
	require.Equal(t, "42\n", res.Output)
	require.DirExists(t, filepath.Join(dir, "died"))
	require.Equal(t, 2, starts())

	require.NoError(t, os.Remove(filepath.Join(dir, "starts")))
	always := code.New("/bin/sh", "-c", script, "sh", dir, os.Args[0], "always")
	always.Idle = 0
	t.Cleanup(func() { require.NoError(t, always.Close()) })
	_, err = always.Run(tenancy.System(context.Background()), b.client, b.conv, codeInput(`console.log(6 * 7)`))
	require.ErrorContains(t, err, "the sandbox ended before it took the job")
	// Not the code's fault, nor the caller's: an internal error.
	var failure *tools.Failure
	var refusal *tools.Refusal
	require.False(t, errors.As(err, &failure) || errors.As(err, &refusal))
	require.Equal(t, 3, starts())
}

// Close ends the children started ahead and waits for a running one to
// end at its bound: afterwards this process has no child left, not even
// one unreaped, and runs are refused.
func TestCloseEndsEveryChild(t *testing.T) {
	// Not parallel: it counts this process's children.
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	before := children(t)
	s := b.sandbox
	s.Limits.Wall = time.Second
	s.Prestart()
	waitReady(t, s, code.DefaultIdle)
	ready := s.ReadyPIDs()

	var (
		wg     sync.WaitGroup
		runErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, runErr = b.run(t, `console.log("spinning"); for (;;) {}`)
	}()
	// The loop runs in one child while two more are started ahead.
	require.Eventually(t, func() bool { return len(children(t)) >= len(before)+1+code.DefaultIdle }, 30*time.Second, time.Millisecond)

	require.NoError(t, s.Close())
	require.Empty(t, s.ReadyPIDs())
	require.Equal(t, before, children(t))
	for _, pid := range ready {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	}
	wg.Wait()
	failed(t, runErr, "hit its time bound", "Before that it printed:\nspinning\n")

	_, err := b.run(t, `console.log(1)`)
	require.ErrorContains(t, err, "the sandbox is closed")
	require.Equal(t, before, children(t))
}

// children are the ids of this process's child processes, zombies
// included.
func children(t *testing.T) map[int]bool {
	t.Helper()
	self := os.Getpid()
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	out := map[int]bool{}
	for _, path := range dirs {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == self {
			pid, err := strconv.Atoi(strings.Fields(string(raw))[0])
			require.NoError(t, err)
			out[pid] = true
		}
	}
	return out
}
