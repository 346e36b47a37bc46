package loop_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/model/openai"
)

// scrape reads /metrics and returns each sample line's value by its
// series, as Prometheus's text format prints it (labels sorted by name).
func (h *harness) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	res, err := h.srv.Client().Get(h.srv.URL + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	return out
}

// TestMetricsAfterATurn runs a real turn against a provider speaking
// OpenAI's wire protocol (two model calls: one asking for the calculator
// and for a tool that does not exist, one answering), then scrapes
// /metrics: the turn, its model calls and tokens by model, its tool calls
// by tool and outcome, the bytes it stored, the job's latency and the
// queue's depth are there, with bounded labels; the subscription that
// followed the turn is not counted as operations.
func TestMetricsAfterATurn(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		var n atomic.Int32
		provider := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			rw.Header().Set("Content-Type", "text/event-stream")
			chunk := func(v string) { fmt.Fprintf(rw, "data: %s\n\n", v) }
			if n.Add(1) == 1 {
				chunk(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[` +
					`{"index":0,"id":"call_a","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"2/3\"}"}},` +
					`{"index":1,"id":"call_b","type":"function","function":{"name":"made_up_tool_42","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)
			} else {
				chunk(`{"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"0.666666666667"},"finish_reason":"stop"}]}`)
			}
			chunk(`{"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":30,"total_tokens":1230,"prompt_tokens_details":{"cached_tokens":1000}}}`)
			chunk(`[DONE]`)
		}))
		t.Cleanup(provider.Close)
		p, err := openai.New(openai.Options{BaseURL: provider.URL + "/v1", APIKey: "test", HTTPClient: provider.Client()})
		require.NoError(t, err)
		h := newHarness(t, d, p)
		id := h.send(t, h.conversation(t), "two thirds", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		// A subscription with its events: none of them is an operation.
		s := h.events(t, id, true)
		require.Len(t, s.rest(t), 11)

		var m map[string]float64
		// The job is marked done just after the turn ends.
		require.Eventually(t, func() bool {
			m = h.scrape(t)
			return m[`toolgate_job_queue_jobs{state="running"}`] == 0
		}, 10*time.Second, 20*time.Millisecond)
		stored := 0.0
		for _, r := range h.client.StoredResult.Query().AllX(tenancy.System(context.Background())) {
			stored += float64(r.Bytes)
		}
		require.Positive(t, stored)
		want := map[string]float64{
			`toolgate_turns_started_total`:                                                                          1,
			`toolgate_turns_finished_total{status="COMPLETED"}`:                                                     1,
			`toolgate_turn_duration_seconds_count{status="COMPLETED"}`:                                              1,
			`toolgate_model_calls_total{model="gpt-4.1",outcome="ok"}`:                                              2,
			`toolgate_model_tokens_total{kind="input",model="gpt-4.1"}`:                                             400,
			`toolgate_model_tokens_total{kind="cache_read",model="gpt-4.1"}`:                                        2000,
			`toolgate_model_tokens_total{kind="cache_write",model="gpt-4.1"}`:                                       0,
			`toolgate_model_tokens_total{kind="output",model="gpt-4.1"}`:                                            60,
			`toolgate_tool_calls_total{outcome="HITS",tool="calculator"}`:                                           1,
			`toolgate_tool_calls_total{outcome="REFUSED",tool="unknown"}`:                                           1,
			`toolgate_stored_result_bytes_total`:                                                                    stored,
			`toolgate_job_latency_seconds_count{kind="toolgate_turn"}`:                                              1,
			`toolgate_job_queue_jobs{state="available"}`:                                                            0,
			`toolgate_job_queue_jobs{state="scheduled"}`:                                                            0,
			`toolgate_job_queue_jobs{state="retryable"}`:                                                            0,
			`toolgate_job_queue_jobs{state="running"}`:                                                              0,
			`toolgate_graphql_operation_duration_seconds_count{errors="false",field="sendMessage",type="mutation"}`: 1,
		}
		for series, v := range want {
			got, ok := m[series]
			require.True(t, ok, "no series %s", series)
			require.Equal(t, v, got, series)
		}
		for series := range m {
			require.NotContains(t, series, `type="subscription"`, "a subscription's events are not operations")
			require.NotContains(t, series, "made_up", "a tool name the model made up is no label")
			require.NotContains(t, series, id, "no id is a label")
		}
	})
}
