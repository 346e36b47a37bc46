package graph_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
)

// A request without a live token is answered 401 at once whatever its
// body, with the server's own time limits (a 30 s ReadTimeout): a body
// that never completes is not awaited, before the answer or after it. The
// connection is closed after the answer, within a second, not held until
// the body's time runs out.
func TestRefusedBeforeTheBody(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	require.Equal(t, 30*time.Second, graph.DefaultReadTimeout, "the limit a held body would cost")
	addr := strings.TrimPrefix(b.srv.URL, "http://")
	partial := "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"query\": \"{ viewer { name } }\", \"padding\": \""
	tests := []struct {
		name, give string
	}{
		{"no token", "POST /graphql HTTP/1.1\r\nHost: x" + partial},
		{"a forged token", "POST /graphql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tg_" + strings.Repeat("0", 40) + partial},
		{"a malformed token", "POST /graphql HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWRhOmFkYQ==" + partial},
		{"a chunked body", "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n186a0\r\n{\"query\": \""},
		{"an upload", "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n{"},
		{"a body over the limit", "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n{\"query\": \""},
		{"a file download", "POST /conversations/x/files/a.txt HTTP/1.1\r\nHost: x" + partial},
		{"an artifact", "PUT /artifacts/x/versions/1 HTTP/1.1\r\nHost: x" + partial},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer conn.Close()
			start := time.Now()
			_, err = conn.Write([]byte(tt.give))
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			r := bufio.NewReader(conn)
			res, err := http.ReadResponse(r, nil)
			require.NoError(t, err, "the answer came before the read deadline")
			answered := time.Since(start)
			raw, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusUnauthorized, res.StatusCode, string(raw))
			require.Equal(t, auth.Unauthenticated, string(raw))
			require.Less(t, answered, time.Second, "answered without waiting for the body")
			// The server lets the connection go: nothing more, then EOF.
			_, err = r.ReadByte()
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server held the connection")
			require.Less(t, time.Since(start), 3*time.Second, "the connection closed soon after the answer")
		})
	}
}

// A request without a token that sends its whole body is answered 401
// too, and the client reads the answer whole, not a reset, although the
// body was never read; a request without a body keeps its connection.
func TestRefusedWithAWholeBody(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	body := `{"query": "{ viewer { name } }", "padding": "` + strings.Repeat("x", 200_000) + `"}`
	for range 5 {
		res, err := http.Post(b.srv.URL+"/graphql", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		require.Equal(t, auth.Unauthenticated, string(raw))
		require.True(t, res.Close, "the connection closes after the answer")
	}
	res, err := http.Get(b.srv.URL + "/graphql?query=%7B%20viewer%20%7B%20name%20%7D%20%7D")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.False(t, res.Close, "a request without a body keeps its connection alive")
}
