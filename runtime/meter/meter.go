// Package meter holds the turn runtime's Prometheus metrics: what the
// service exists for (turns, model calls and their tokens, tool calls,
// retries, stored results) and the job queue that runs turns. Labels are
// bounded: statuses, outcomes, model names, built-in tool names (every
// application tool counts as "application"), token kinds, job kinds and
// states; never an id.
package meter

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Meter records the runtime's metrics. The zero of a *Meter (nil) records
// nothing.
type Meter struct {
	turnsStarted      prometheus.Counter
	turnsFinished     *prometheus.CounterVec
	turnDuration      *prometheus.HistogramVec
	modelCalls        *prometheus.CounterVec
	modelTokens       *prometheus.CounterVec
	toolCalls         *prometheus.CounterVec
	retries           *prometheus.CounterVec
	storedResultBytes prometheus.Counter
	jobLatency        *prometheus.HistogramVec
}

// New registers the runtime's metrics with reg. queue, when set, reports
// the job queue's depth at each scrape.
func New(reg prometheus.Registerer, queue QueueCounter) *Meter {
	m := &Meter{
		turnsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_turns_started_total",
			Help: "Turns whose first run started.",
		}),
		turnsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_turns_finished_total",
			Help: "Turns that ended, by status (COMPLETED, FAILED, CANCELLED).",
		}, []string{"status"}),
		turnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_turn_duration_seconds",
			Help:    "Time from a turn's message to its end, pauses for a question included, by status.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 12), // 0.5 s to about 17 min
		}, []string{"status"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_model_calls_total",
			Help: "Calls to the model provider, by model and outcome (ok, error).",
		}, []string{"model", "outcome"}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_model_tokens_total",
			Help: "Tokens of model calls, by model and kind (input: uncached input, cache_read, cache_write, output).",
		}, []string{"model", "kind"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_calls_total",
			Help: "Tool calls recorded, by tool (application tools as \"application\") and outcome.",
		}, []string{"tool", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_call_retries_total",
			Help: "Tool call attempts past the first, by tool (application tools as \"application\").",
		}, []string{"tool"}),
		storedResultBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_stored_result_bytes_total",
			Help: "Bytes of tool results stored under refs.",
		}),
		jobLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_job_latency_seconds",
			Help:    "Time from when a job was due to when a worker started it, by job kind.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"kind"}),
	}
	reg.MustRegister(m.turnsStarted, m.turnsFinished, m.turnDuration, m.modelCalls, m.modelTokens,
		m.toolCalls, m.retries, m.storedResultBytes, m.jobLatency)
	if queue != nil {
		reg.MustRegister(&queueCollector{count: queue})
	}
	return m
}

// TurnStarted counts a turn's first run.
func (m *Meter) TurnStarted() {
	if m != nil {
		m.turnsStarted.Inc()
	}
}

// TurnFinished counts a turn that ended with status, d after its message.
func (m *Meter) TurnFinished(status string, d time.Duration) {
	if m != nil {
		m.turnsFinished.WithLabelValues(status).Inc()
		m.turnDuration.WithLabelValues(status).Observe(max(d, 0).Seconds())
	}
}

// Tokens are a model call's token counts.
type Tokens struct {
	Input, CacheRead, CacheWrite, Output int64
}

// ModelCall counts a model call; a failed one has no tokens.
func (m *Meter) ModelCall(model string, failed bool, tok Tokens) {
	if m == nil {
		return
	}
	if model == "" {
		model = "unknown"
	}
	if failed {
		m.modelCalls.WithLabelValues(model, "error").Inc()
		return
	}
	m.modelCalls.WithLabelValues(model, "ok").Inc()
	m.modelTokens.WithLabelValues(model, "input").Add(float64(tok.Input))
	m.modelTokens.WithLabelValues(model, "cache_read").Add(float64(tok.CacheRead))
	m.modelTokens.WithLabelValues(model, "cache_write").Add(float64(tok.CacheWrite))
	m.modelTokens.WithLabelValues(model, "output").Add(float64(tok.Output))
}

// ToolCall counts a recorded tool call, its retries and the bytes it
// stored. tool is a built-in tool's name or "application".
func (m *Meter) ToolCall(tool, outcome string, attempts int, storedBytes int64) {
	if m == nil {
		return
	}
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	if attempts > 1 {
		m.retries.WithLabelValues(tool).Add(float64(attempts - 1))
	}
	m.storedResultBytes.Add(float64(storedBytes))
}

// JobStarted observes how long a job waited past when it was due.
func (m *Meter) JobStarted(kind string, due time.Time) {
	if m != nil {
		m.jobLatency.WithLabelValues(kind).Observe(max(time.Since(due), 0).Seconds())
	}
}

// QueueCounter counts the queue's jobs by state.
type QueueCounter func(ctx context.Context) (map[string]int, error)

// QueueStates are the job states reported, each even when empty.
var QueueStates = []string{"available", "scheduled", "retryable", "running"}

var queueDesc = prometheus.NewDesc("toolgate_job_queue_jobs",
	"Jobs in the queue by state (available: due and waiting for a worker; scheduled and retryable: waiting for their time; running).",
	[]string{"state"}, nil)

// queueCollector reads the queue's depth at each scrape.
type queueCollector struct{ count QueueCounter }

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDesc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queueDesc, err)
		return
	}
	for _, state := range QueueStates {
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(counts[state]), state)
	}
}
