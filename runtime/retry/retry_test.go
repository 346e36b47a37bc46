package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/tools"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestPolicyDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		give  int
		after time.Duration
		want  time.Duration
	}{
		{name: "first retry", give: 0, want: 500 * time.Millisecond},
		{name: "doubles", give: 1, want: time.Second},
		{name: "doubles again", give: 2, want: 2 * time.Second},
		{name: "reaches the cap", give: 4, want: 8 * time.Second},
		{name: "stays at the cap", give: 30, want: 8 * time.Second},
		{name: "retry-after above backoff", give: 0, after: 3 * time.Second, want: 3 * time.Second},
		{name: "retry-after below backoff", give: 2, after: 100 * time.Millisecond, want: 2 * time.Second},
		{name: "retry-after capped", give: 0, after: time.Minute, want: 8 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Policy{}.Delay(tt.give, tt.after))
		})
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	require.NoError(t, Wait(t.Context(), 0))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, Wait(ctx, time.Hour), context.Canceled)
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give map[string]string
		want time.Duration
	}{
		{name: "none", give: map[string]string{}, want: 0},
		{name: "seconds", give: map[string]string{"Retry-After": "2"}, want: 2 * time.Second},
		{name: "fractional seconds", give: map[string]string{"Retry-After": "1.5"}, want: 1500 * time.Millisecond},
		{name: "milliseconds win", give: map[string]string{"Retry-After": "2", "Retry-After-Ms": "250"}, want: 250 * time.Millisecond},
		{name: "http date against the answer's date", give: map[string]string{
			"Retry-After": "Wed, 21 Oct 2015 07:28:05 GMT",
			"Date":        "Wed, 21 Oct 2015 07:28:00 GMT",
		}, want: 5 * time.Second},
		{name: "absurdly large", give: map[string]string{"Retry-After": "1e300"}, want: 24 * time.Hour},
		{name: "garbage", give: map[string]string{"Retry-After": "soon"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.give {
				h.Set(k, v)
			}
			require.Equal(t, tt.want, After(h))
		})
	}
}

// recorder is a sleep that records the waits instead of waiting.
type recorder struct{ waits []time.Duration }

func (r *recorder) sleep(_ context.Context, d time.Duration) error {
	r.waits = append(r.waits, d)
	return nil
}

func TestDo(t *testing.T) {
	t.Parallel()
	errBusy := errors.New("busy")
	errBad := errors.New("bad")
	always := func(err error) Verdict {
		if errors.Is(err, errBusy) {
			return Verdict{Retry: true, After: 3 * time.Second}
		}
		return Verdict{}
	}
	tests := []struct {
		name         string
		give         []error
		attempts     int
		wantAttempts int
		wantErr      string
		wantWaits    []time.Duration
	}{
		{name: "first try", give: []error{nil}, wantAttempts: 1},
		{name: "busy then done", give: []error{errBusy, nil}, wantAttempts: 2, wantWaits: []time.Duration{3 * time.Second}},
		{name: "final error stops", give: []error{errBad}, wantAttempts: 1, wantErr: "bad"},
		{name: "exhausted", give: []error{errBusy, errBusy, errBusy, errBusy}, wantAttempts: 4,
			wantErr: "busy (gave up after 4 attempts)", wantWaits: []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}},
		{name: "one attempt gives nothing up", give: []error{errBusy}, attempts: 1, wantAttempts: 1, wantErr: "busy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			n := 0
			got, err := Do(t.Context(), Policy{Attempts: tt.attempts, Sleep: rec.sleep}, always, func(context.Context) error {
				n++
				return tt.give[n-1]
			})
			require.Equal(t, tt.wantAttempts, got)
			require.Equal(t, tt.wantAttempts, n)
			if tt.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, tt.wantErr)
			}
			require.Equal(t, tt.wantWaits, rec.waits)
		})
	}
}

func TestDoStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	sleep := func(ctx context.Context, d time.Duration) error {
		cancel()
		return Wait(ctx, d)
	}
	n, err := Do(ctx, Policy{Sleep: sleep}, func(error) Verdict { return Verdict{Retry: true} }, func(context.Context) error {
		return errors.New("busy")
	})
	require.Equal(t, 1, n)
	require.ErrorIs(t, err, context.Canceled)
}

// TestByEffect is the per-effect rule, the one place it is written: what
// never reached the backend is always sent again; what may have reached it
// only when transient and the call reads or is idempotent.
func TestByEffect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		effect tools.Effect
		give   error
		want   bool
	}{
		{"never reached, write", tools.EffectWrite, NeverReached(errors.New("refused")), true},
		{"never reached, read", tools.EffectRead, NeverReached(errors.New("refused")), true},
		{"connection dropped, write", tools.EffectWrite, Reconnect(errors.New("session gone")), true},
		{"503, read", tools.EffectRead, Reached(errors.New("503"), true, 0), true},
		{"503, idempotent", tools.EffectIdempotent, Reached(errors.New("503"), true, 0), true},
		{"503, write", tools.EffectWrite, Reached(errors.New("503"), true, 0), false},
		{"answered for good, read", tools.EffectRead, Reached(errors.New("400"), false, 0), false},
		{"not a tool failure", tools.EffectRead, errors.New("plain"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, ByEffect(tt.effect)(tt.give).Retry)
		})
	}
	require.Equal(t, 2*time.Second, ByEffect(tools.EffectRead)(Reached(errors.New("429"), true, 2*time.Second)).After)
	require.True(t, MayHaveRun(Reached(errors.New("503"), true, 0)))
	require.False(t, MayHaveRun(NeverReached(errors.New("refused"))))
}

// A failure on a dropped connection is tried again at once, by the same
// policy and within its attempts.
func TestDoReconnectsAtOnce(t *testing.T) {
	t.Parallel()
	var waits []time.Duration
	p := Policy{Attempts: 3, Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	n, err := Do(t.Context(), p, ByEffect(tools.EffectWrite), func(context.Context) error {
		return Reconnect(errors.New("session gone"))
	})
	require.Equal(t, 3, n)
	var exhausted *ExhaustedError
	require.ErrorAs(t, err, &exhausted)
	require.Empty(t, waits)
}

func TestNoWait(t *testing.T) {
	t.Parallel()
	require.NoError(t, NoWait(t.Context(), time.Hour))
}

// TestBackend: a family's request failing with a *tools.Transient is tried
// again on the policy's schedule, honouring Retry-After, and the last
// attempt's own error comes back; any other failure is final at once.
func TestBackend(t *testing.T) {
	t.Parallel()
	var waits []time.Duration
	p := Policy{Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	busy := &tools.Transient{Err: errors.New("HTTP 503"), Header: http.Header{"Retry-After": {"3"}}}
	tries := 0
	err := tools.Try(t.Context(), Backend(p), func(context.Context) error { tries++; return busy })
	require.Equal(t, 4, tries)
	require.Same(t, busy, err, "the last attempt's error, not a wrapper")
	require.Equal(t, []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}, waits, "Retry-After over the doubling waits")

	final := errors.New("HTTP 404")
	tries = 0
	ctx, attempts := tools.WithAttempts(t.Context())
	err = tools.Try(ctx, Backend(p), func(context.Context) error { tries++; return final })
	require.Equal(t, 1, tries)
	require.Same(t, final, err)
	require.Equal(t, 1, attempts.N())

	tries = 0
	err = tools.Try(ctx, Backend(p), func(context.Context) error {
		if tries++; tries < 3 {
			return &tools.Transient{Err: errors.New("dropped")}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, attempts.N(), "the most any request took")
}
