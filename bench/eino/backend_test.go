package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackendDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give, want string
	}{
		{give: "postgres: 15/main: postgres einobench 127.0.0.1(32854) idle\x00\x00", want: "einobench"},
		{give: "postgres: postgres einobench 127.0.0.1(32854) SELECT", want: "einobench"},
		{give: "postgres: app einobench [local] idle in transaction", want: "einobench"},
		{give: "postgres: 15/main: checkpointer ", want: ""},
		{give: "postgres: 15/main: logical replication launcher ", want: ""},
		{give: "/usr/lib/postgresql/15/bin/postgres\x00-D\x00/var/lib/postgresql/15/main\x00", want: ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, backendDatabase(tt.give), tt.give)
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A command with a space and a parenthesis, as a process may name itself.
	stat := "4242 (tool gate) (x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 123 45 0 0 20 0 12 0 100 0 0\n"
	got, err := parseStat([]byte(stat))
	require.NoError(t, err)
	require.Equal(t, 168*tick, got)
}

// TestEinoTurn runs the Eino side's turn against the fake model, with a
// calculate endpoint standing in for toolgate's: the fake model speaks what
// the eino-ext OpenAI model reads, and the turn makes one calculator call
// and two model calls.
func TestEinoTurn(t *testing.T) {
	t.Parallel()
	model := &fakeModel{}
	modelSrv := httptest.NewServer(model)
	t.Cleanup(modelSrv.Close)
	var asked atomic.Int64
	calc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":{"calculate":{"value":"2"}}}`))
	}))
	t.Cleanup(calc.Close)
	tg := &server{url: calc.URL, token: "t", http: &http.Client{Timeout: 10 * time.Second}}
	ctx := context.Background()
	a, err := newEinoAgent(ctx, modelSrv.URL, tg, "conversation")
	require.NoError(t, err)
	require.NoError(t, a.turn(ctx))
	require.Equal(t, int64(1), asked.Load(), "calculate asked once")
	require.Equal(t, int64(1), a.calls.Load(), "the tool ran once")
	require.Equal(t, int64(2), model.requests.Load(), "two model calls")
	require.Zero(t, model.refused.Load())
}
