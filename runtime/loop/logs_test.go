package loop_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/loop"
)

// logBuffer collects JSON log records while the runtime writes them.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		out = append(out, r)
	}
	return out
}

func withLog(l *logBuffer) option {
	return func(c *loop.Config) {
		c.Log = slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// TestLogsNameTurnsByTheirAPIIDs: a failed turn's log line names the turn
// and its conversation as a client knows them, never by database row.
func TestLogsNameTurnsByTheirAPIIDs(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		var logs logBuffer
		h := newHarness(t, d, &scripted{}, withLog(&logs)) // no answers: the model call fails
		conv := h.conversation(t)
		id := h.send(t, conv, "hello", "")
		require.Equal(t, turn.StatusFAILED, h.wait(t, id).Status)
		var failed map[string]any
		require.Eventually(t, func() bool {
			for _, r := range logs.records(t) {
				if r["msg"] == "turn failed" {
					failed = r
					return true
				}
			}
			return false
		}, 5*time.Second, 10*time.Millisecond)
		require.Equal(t, id, failed["turn"])
		require.Equal(t, conv, failed["conversation"])
		for _, r := range logs.records(t) {
			if v, ok := r["turn"]; ok {
				require.Equal(t, id, v, "every line names the turn by its API id: %v", r)
			}
		}
	})
}

// TestQueueOutageLogsOncePerBackoff: with the database gone, every part
// of the job queue that reads it fails, again and again; the log gets one
// line per back-off, the first at once.
func TestQueueOutageLogsOncePerBackoff(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	d := dbtest.Open(t, dbtest.SQLite)
	newHarness(t, d, &scripted{}, withLog(&logs))
	time.Sleep(200 * time.Millisecond) // the queue is up and polling
	require.NoError(t, d.SQL.Close())
	failures := func() map[string]int {
		byMsg := map[string]int{}
		for _, r := range logs.records(t) {
			if lvl := r["level"]; lvl == "ERROR" || lvl == "WARN" {
				byMsg[r["msg"].(string)]++
			}
		}
		return byMsg
	}
	// An idle queue reads the database every few seconds, not at once:
	// the outage is reported when the first read fails.
	require.Eventually(t, func() bool { return len(failures()) > 0 }, 15*time.Second, 10*time.Millisecond, "the outage is reported")
	time.Sleep(1500 * time.Millisecond)
	for msg, n := range failures() {
		require.LessOrEqual(t, n, 2, "%q logged %d times in the 1.5 s after the first report", msg, n)
	}
}
