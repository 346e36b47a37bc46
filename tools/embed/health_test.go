package embed_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/embed"
)

// endpoint is an OpenAI-compatible /v1/embeddings server that answers 503
// while down, and to any request holding the poison word.
type endpoint struct {
	down     atomic.Bool
	requests atomic.Int32
	probes   atomic.Int32
}

func (f *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	var req struct {
		Input []string `json:"input"`
		Model string   `json:"model"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if len(req.Input) == 1 && req.Input[0] == "availability" {
		f.probes.Add(1)
	}
	for _, in := range req.Input {
		if f.down.Load() || strings.Contains(in, "POISON") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"message":"embedding backend is down"}}`))
			return
		}
	}
	data := make([]map[string]any, len(req.Input))
	for i, in := range req.Input {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": embed.Vector(in)[:16]}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
}

// watch runs a watched model on f, re-probed every `every`, until the test ends.
func watch(t *testing.T, f *endpoint, every time.Duration) *embed.Watched {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	e, err := embed.New(embed.Config{Provider: embed.ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "test", Model: "bge-small"})
	require.NoError(t, err)
	w := embed.Watch(e, every)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return w
}

// TestWatchedDownSinceStart: a model that answers 503 from the start is
// down once the first probe has told, with the reason; asked again every
// interval, it is up as soon as it answers.
func TestWatchedDownSinceStart(t *testing.T) {
	t.Parallel()
	f := &endpoint{}
	f.down.Store(true)
	w := watch(t, f, 20*time.Millisecond)
	require.Eventually(t, func() bool { return w.Down() != "" }, 10*time.Second, 5*time.Millisecond)
	require.Contains(t, w.Down(), "the embedding model bge-small does not answer (")
	require.Contains(t, w.Down(), "503")
	require.Equal(t, w.Down(), embed.Down(w))
	require.Eventually(t, func() bool { return f.probes.Load() >= 3 }, 10*time.Second, 5*time.Millisecond, "asked again while down")

	f.down.Store(false)
	require.Eventually(t, func() bool { return w.Down() == "" }, 10*time.Second, 5*time.Millisecond, "a recovered model is up again")
	n := f.probes.Load()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, n, f.probes.Load(), "a model that answers is not probed")
}

// TestWatchedLearnsFromRequests: a request that fails because its text
// did (the model answers a probe) leaves the model up; one that fails
// because the model went down brings it down.
func TestWatchedLearnsFromRequests(t *testing.T) {
	t.Parallel()
	f := &endpoint{}
	w := watch(t, f, 20*time.Millisecond)
	require.Eventually(t, func() bool { return f.probes.Load() == 1 }, 10*time.Second, 5*time.Millisecond, "probed at start")
	require.Empty(t, w.Down())

	_, err := w.Embed(context.Background(), []string{"POISON text"})
	require.Error(t, err)
	require.Eventually(t, func() bool { return f.probes.Load() == 2 }, 10*time.Second, 5*time.Millisecond, "a failure asks for a probe")
	require.Empty(t, w.Down(), "the probe answered: the model is up")

	f.down.Store(true)
	_, err = w.Embed(context.Background(), []string{"any text"})
	require.Error(t, err)
	require.Eventually(t, func() bool { return w.Down() != "" }, 10*time.Second, 5*time.Millisecond)
}

// TestWatchedUpOnAnAnswer: a model down since start is up the moment a
// request is answered, without waiting for the next probe.
func TestWatchedUpOnAnAnswer(t *testing.T) {
	t.Parallel()
	f := &endpoint{}
	f.down.Store(true)
	w := watch(t, f, time.Hour)
	require.Eventually(t, func() bool { return w.Down() != "" }, 10*time.Second, 5*time.Millisecond)
	f.down.Store(false)
	_, err := w.Embed(context.Background(), []string{"any text"})
	require.NoError(t, err)
	require.Empty(t, w.Down())
	require.EqualValues(t, 1, f.probes.Load())
}

// TestDownOfAnUnwatchedModel: a model that is not watched is never down.
func TestDownOfAnUnwatchedModel(t *testing.T) {
	t.Parallel()
	require.Empty(t, embed.Down(embed.NewLocal()))
}
