package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTracingWantedOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give map[string]string
		want bool
	}{
		{give: map[string]string{}, want: false},
		{give: map[string]string{"OTEL_SERVICE_NAME": "api"}, want: false},
		{give: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, want: false},
		{give: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, want: true},
		{give: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{give: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: true},
		{give: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: true},
		{give: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tracingWanted(func(k string) string { return tt.give[k] }), "%v", tt.give)
	}
}

// consoleSpan is a span as the console exporter prints it: one JSON object
// a line.
type consoleSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
}

// With OTEL_TRACES_EXPORTER=console the real binary prints its spans on
// standard output: the demo's turn, its model calls, its tool calls and the
// API requests those tool calls make share the turn's trace id.
func TestConsoleTracesShareTheTurnsTraceID(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	var out, logs syncBuffer
	cmd := exec.Command(bin, "serve", "--demo", "--addr", "127.0.0.1:0",
		"--database-url", "sqlite://"+filepath.Join(t.TempDir(), "t.db"), "--model-provider", "replay")
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=console", "OTEL_BSP_SCHEDULE_DELAY=50")
	cmd.Stdout, cmd.Stderr = &out, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	parse := func() []consoleSpan {
		var spans []consoleSpan
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if !bytes.HasPrefix(line, []byte(`{"Name"`)) {
				continue
			}
			var s consoleSpan
			if json.Unmarshal(line, &s) == nil {
				spans = append(spans, s)
			}
		}
		return spans
	}
	// The demo's first turn runs at start; its root span ends with the run.
	require.Eventually(t, func() bool {
		for _, s := range parse() {
			if s.Name == "turn" {
				return true
			}
		}
		return false
	}, 90*time.Second, 50*time.Millisecond, "no turn span printed; logs:\n%s", logs.String())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "a graceful stop flushes the spans; logs:\n%s", logs.String())

	spans := parse()
	var root consoleSpan
	for _, s := range spans {
		if s.Name == "turn" {
			root = s
		}
	}
	names := map[string]bool{}
	for _, s := range spans {
		if s.SpanContext.TraceID == root.SpanContext.TraceID {
			names[s.Name] = true
		}
	}
	require.True(t, names["chat replay"], "a model call in the turn's trace: %v", names)
	var tool, server bool
	for n := range names {
		tool = tool || strings.HasPrefix(n, "execute_tool ")
		server = server || n == "POST /graphql"
	}
	require.True(t, tool, "a tool call in the turn's trace: %v", names)
	require.True(t, server, "the API's span of that tool call in the turn's trace: %v", names)
	keys := map[string]bool{}
	for _, a := range root.Attributes {
		keys[a.Key] = true
	}
	require.True(t, keys["toolgate.turn.id"] && keys["toolgate.conversation.id"], "%v", keys)
}
