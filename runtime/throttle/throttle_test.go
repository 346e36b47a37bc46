package throttle_test

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/throttle"
)

func TestRepeatsCostOneLinePerBackoff(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	start := now
	log := slog.New(throttle.New(slog.NewTextHandler(&buf, nil), throttle.Options{Now: func() time.Time { return now }}))

	// A queue polling a database that is down: 20 errors a second for 16 s,
	// with a line of another kind now and then.
	sent := 0
	for ; now.Sub(start) < 16*time.Second; now = now.Add(50 * time.Millisecond) {
		log.Error("producer: Error fetching jobs", "err", "connection refused")
		sent++
		if sent%100 == 0 {
			log.Info("still serving")
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var at []string
	total := 0
	for _, l := range lines {
		if !strings.Contains(l, "Error fetching jobs") {
			continue
		}
		total++
		if m := regexp.MustCompile(`repeats_dropped=(\d+)`).FindStringSubmatch(l); m != nil {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			total += n
		}
		at = append(at, l)
	}
	// Logged at 0 s, then after back-offs of 1, 2, 4 and 8 s.
	require.Len(t, at, 5, buf.String())
	require.NotContains(t, at[0], "repeats_dropped")
	require.Contains(t, at[1], "repeats_dropped=19")
	require.LessOrEqual(t, total, sent, "every line counts what it stands for")
	require.Equal(t, 3, strings.Count(buf.String(), "still serving"), "info lines pass untouched")

	// Quiet for longer than the back-off: a new failure is logged at once,
	// and its back-off starts again from the first.
	buf.Reset()
	now = now.Add(time.Hour)
	log.Error("producer: Error fetching jobs", "err", "connection refused")
	now = now.Add(1100 * time.Millisecond)
	log.Error("producer: Error fetching jobs", "err", "connection refused")
	require.Equal(t, 2, strings.Count(buf.String(), "Error fetching jobs"), buf.String())
}

func TestAttrsAndGroupsShareTheBackoff(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := throttle.New(slog.NewTextHandler(&buf, nil), throttle.Options{})
	a := slog.New(h).With("queue", "default")
	b := slog.New(h).WithGroup("g")
	a.Warn("boom")
	b.Warn("boom")
	a.Warn("boom")
	require.Equal(t, 1, strings.Count(buf.String(), "boom"), buf.String())
	require.True(t, slog.New(h).Enabled(context.Background(), slog.LevelInfo))
}
