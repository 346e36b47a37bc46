package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBootstrapPrintsOneJSONLine(t *testing.T) {
	t.Parallel()
	dbURL := "sqlite://" + filepath.Join(t.TempDir(), "t.db")
	boot := func() map[string]string {
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"bootstrap", "--database-url", dbURL, "--org", "Acme", "--user", "Ann", "--department", "Legal"}, &out, &errOut)
		require.NoError(t, err, errOut.String())
		require.Equal(t, 1, strings.Count(out.String(), "\n"))
		var got map[string]string
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		require.Len(t, got, 3)
		return got
	}
	first, second := boot(), boot()
	require.Regexp(t, `^tg_[A-Za-z0-9_-]{43}$`, first["token"])
	require.NotEqual(t, first["token"], second["token"], "each bootstrap issues a new token")
	require.Equal(t, first["organizationId"], second["organizationId"], "the organisation is reused")
	require.Equal(t, first["userId"], second["userId"], "the user is reused")

	err := run(context.Background(), []string{"bootstrap", "--database-url", dbURL, "--org", "Acme"}, io.Discard, io.Discard)
	require.EqualError(t, err, "bootstrap needs --org and --user")
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	dbURL := "sqlite://" + filepath.Join(t.TempDir(), "t.db")
	for range 2 {
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), []string{"migrate", "--database-url", dbURL}, &out, io.Discard))
		require.Equal(t, "schema up to date\n", out.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	require.EqualError(t, run(context.Background(), []string{"frobnicate"}, io.Discard, &errOut), `unknown command "frobnicate"`)
	require.Contains(t, errOut.String(), "Usage:")
}

// syncBuffer is a buffer the server goroutine writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeDemoPrintsPlaygroundAndToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "t.db")
	// serveDemo starts `serve --demo`, waits for its banner and returns the
	// base URL, the demo token and a function that stops it.
	serveDemo := func(fresh bool) (string, string, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var out, logs syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"serve", "--demo", "--addr", "127.0.0.1:0", "--database-url", "sqlite://" + dbPath}, &out, &logs)
		}()
		re := regexp.MustCompile(`playground, signed in: (http://\S+)/playground#token=(\S+)\n\s+demo token: (\S+).*\n\s+admin console: (\S+)`)
		var m []string
		require.Eventually(t, func() bool { m = re.FindStringSubmatch(out.String()); return m != nil }, 20*time.Second, 20*time.Millisecond)
		require.Equal(t, m[2], m[3], "the playground's link signs in with the demo token")
		require.Equal(t, m[1]+"/admin#token="+m[2], m[4], "the console's link signs in with the demo token")
		return m[1], m[2], func() {
			if fresh {
				// Only a new database: the first stop may leave the demo's turn
				// running, and the second start then rightly resumes it.
				require.NotContains(t, logs.String(), "resumed turns left running", "a new database left nothing running")
			}
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err, "shutdown is graceful")
			case <-time.After(20 * time.Second):
				t.Fatal("server did not stop")
			}
		}
	}
	query := func(base, token, q string) string {
		req, err := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(`{"query":"`+q+`"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return string(body)
	}

	base, token, stop := serveDemo(true)
	require.JSONEq(t, `{"data":{"viewer":{"name":"Ada Lovelace","organizationName":"Demo Organisation"},"agents":{"edges":[{"node":{"name":"Assistant"}}]}}}`,
		query(base, token, "{ viewer { name organizationName } agents { edges { node { name } } } }"))
	stop()

	// A second start reuses the token rather than adding another.
	base, again, stop := serveDemo(false)
	defer stop()
	require.Equal(t, token, again)
	require.JSONEq(t, `{"data":{"apiTokens":[{"name":"bootstrap"}]}}`, query(base, again, "{ apiTokens { name } }"))
	kept, err := os.ReadFile(filepath.Join(dir, "demo-token"))
	require.NoError(t, err)
	require.Equal(t, token+"\n", string(kept))
	info, err := os.Stat(filepath.Join(dir, "demo-token"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "readable by its owner only")
}
