package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/runtime/retry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// answer is one scripted HTTP answer of the test server.
type answer struct {
	status int
	header map[string]string
	body   string
}

// testBundle is a server that plays scripted answers, and a sleep that
// records the waits instead of waiting.
type testBundle struct {
	server *httptest.Server
	mu     sync.Mutex
	calls  int
	waits  []time.Duration
}

func setup(t *testing.T, answers ...answer) *testBundle {
	t.Helper()
	b := &testBundle{}
	b.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		n := b.calls
		b.calls++
		b.mu.Unlock()
		a := answers[min(n, len(answers)-1)]
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(b.server.Close)
	return b
}

func (b *testBundle) sleep(_ context.Context, d time.Duration) error {
	b.waits = append(b.waits, d)
	return nil
}

// call is what a provider does inside Do: one request through the
// middleware, failing on an error status the way an SDK would.
func (b *testBundle) call(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.server.URL, nil)
	if err != nil {
		return "", err
	}
	res, err := Middleware(req, b.server.Client().Do)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode >= 400 {
		return "", fmt.Errorf("sdk error %d", res.StatusCode)
	}
	return string(body), nil
}

func TestCallRetriesUntilSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t,
		answer{status: 429, body: `{"error":{"message":"slow down"}}`},
		answer{status: 503, body: `upstream busy`},
		answer{status: 502, header: map[string]string{"Retry-After": "3"}},
		answer{status: 200, body: "ok"},
	)
	got, err := Call(t.Context(), retry.Policy{Sleep: b.sleep}, "openai", b.call)
	require.NoError(t, err)
	require.Equal(t, "ok", got)
	require.Equal(t, 4, b.calls)
	require.Equal(t, []time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second}, b.waits)
}

func TestCallExhausted(t *testing.T) {
	t.Parallel()
	b := setup(t, answer{status: 500, body: `{"error":{"message":"boom"}}`})
	_, err := Call(t.Context(), retry.Policy{Sleep: b.sleep}, "anthropic", b.call)
	require.EqualError(t, err, "anthropic: 500 Internal Server Error: boom (gave up after 4 attempts)")
	var exhausted *retry.ExhaustedError
	require.ErrorAs(t, err, &exhausted)
	require.Equal(t, 4, exhausted.Attempts)
	var serr *StatusError
	require.ErrorAs(t, err, &serr)
	require.Equal(t, 500, serr.StatusCode)
	require.Equal(t, 4, b.calls)
	require.Equal(t, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}, b.waits)
}

func TestCallFailsAtOnceOnClientErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give answer
		want string
	}{
		{name: "unauthorized", give: answer{status: 401, body: `{"error":{"message":"Incorrect API key provided"}}`}, want: "openai: 401 Unauthorized: Incorrect API key provided"},
		{name: "bad request", give: answer{status: 400, body: `{"error":"model not found"}`}, want: "openai: 400 Bad Request: model not found"},
		{name: "no body", give: answer{status: 404}, want: "openai: 404 Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.give)
			_, err := Call(t.Context(), retry.Policy{Sleep: b.sleep}, "openai", b.call)
			require.EqualError(t, err, tt.want)
			require.Equal(t, 1, b.calls)
			require.Empty(t, b.waits)
		})
	}
}

func TestCallRetriesConnectionErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, answer{status: 200})
	url := b.server.URL
	b.server.Close()
	var waits []time.Duration
	sleep := func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}
	calls := 0
	_, err := Call(t.Context(), retry.Policy{Attempts: 2, Sleep: sleep}, "openai", func(ctx context.Context) (int, error) {
		calls++
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		res, err := Middleware(req, http.DefaultClient.Do)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		return res.StatusCode, nil
	})
	require.ErrorContains(t, err, "openai: ")
	require.ErrorContains(t, err, "(gave up after 2 attempts)")
	require.Equal(t, 2, calls)
	require.Equal(t, []time.Duration{500 * time.Millisecond}, waits)
}

func TestCallOtherErrorsAreFinal(t *testing.T) {
	t.Parallel()
	calls := 0
	_, err := Call(t.Context(), retry.Policy{}, "openai", func(context.Context) (int, error) {
		calls++
		return 0, errors.New("decode answer: unexpected token")
	})
	require.EqualError(t, err, "openai: decode answer: unexpected token")
	require.Equal(t, 1, calls)
}

func TestCallStopsWhenContextEndsDuringWait(t *testing.T) {
	t.Parallel()
	b := setup(t, answer{status: 429})
	ctx, cancel := context.WithCancel(t.Context())
	sleep := func(ctx context.Context, d time.Duration) error {
		cancel()
		return retry.Wait(ctx, d)
	}
	_, err := Call(ctx, retry.Policy{Sleep: sleep}, "openai", b.call)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, b.calls)
}

func TestMessageOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give string
		want string
	}{
		{name: "openai and anthropic shape", give: `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`, want: "Rate limited"},
		{name: "error as text", give: `{"error":"model \"x\" not found"}`, want: `model "x" not found`},
		{name: "top-level message", give: `{"message":"quota"}`, want: "quota"},
		{name: "detail", give: `{"detail":"Not Found"}`, want: "Not Found"},
		{name: "html page", give: "<html>\n  <h1>502 Bad Gateway</h1>\n</html>", want: "<html> <h1>502 Bad Gateway</h1> </html>"},
		{name: "empty", give: "  ", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, messageOf([]byte(tt.give)))
		})
	}
}
