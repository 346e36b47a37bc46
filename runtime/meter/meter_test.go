package meter_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/meter"
)

func TestToolCallCountsRetriesAndBytes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := meter.New(reg, nil)
	m.ToolCall("research_web", "HITS", 3, 1200)
	m.ToolCall("research_web", "OUTAGE", 1, 80)
	m.ToolCall("application", "HITS", 2, 20)
	want := `
# HELP toolgate_tool_call_retries_total Tool call attempts past the first, by tool (application tools as "application").
# TYPE toolgate_tool_call_retries_total counter
toolgate_tool_call_retries_total{tool="application"} 1
toolgate_tool_call_retries_total{tool="research_web"} 2
# HELP toolgate_stored_result_bytes_total Bytes of tool results stored under refs.
# TYPE toolgate_stored_result_bytes_total counter
toolgate_stored_result_bytes_total 1300
`
	require.NoError(t, testutil.GatherAndCompare(reg, stringsReader(want), "toolgate_tool_call_retries_total", "toolgate_stored_result_bytes_total"))
}

func TestQueueDepthEachStateEvenEmpty(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	meter.New(reg, func(context.Context) (map[string]int, error) {
		return map[string]int{"available": 4, "completed": 90}, nil
	})
	want := `
# HELP toolgate_job_queue_jobs Jobs in the queue by state (available: due and waiting for a worker; scheduled and retryable: waiting for their time; running).
# TYPE toolgate_job_queue_jobs gauge
toolgate_job_queue_jobs{state="available"} 4
toolgate_job_queue_jobs{state="retryable"} 0
toolgate_job_queue_jobs{state="running"} 0
toolgate_job_queue_jobs{state="scheduled"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, stringsReader(want), "toolgate_job_queue_jobs"))

	// A queue that cannot be read fails the scrape of that metric, loudly.
	broken := prometheus.NewRegistry()
	meter.New(broken, func(context.Context) (map[string]int, error) { return nil, errors.New("database down") })
	_, err := broken.Gather()
	require.ErrorContains(t, err, "database down")
}

func TestNilMeterRecordsNothing(t *testing.T) {
	t.Parallel()
	var m *meter.Meter
	m.TurnStarted()
	m.ToolCall("calculator", "HITS", 1, 1)
	m.ModelCall("m", false, meter.Tokens{Input: 1})
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
