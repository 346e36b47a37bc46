package dispatch

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLocalServesLikeTheNetwork sends requests through Local to a handler
// and reads them as the dispatcher does: the handler sees the request as a
// server would (method, path, headers, body, a remote address), and the
// caller its status, headers and body; an answer past maxResponse is cut
// one byte beyond it, a panic is an error after the request counts as
// written, and nothing is sent before the server names its handler.
func TestLocalServesLikeTheNetwork(t *testing.T) {
	var l Local
	client := &http.Client{Transport: &l}
	postTo := func(url, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer scope-token")
		return client.Do(req)
	}
	post := func(body string) (*http.Response, error) { return postTo("http://127.0.0.1:8080/graphql?x=1", body) }
	_, err := post("{}")
	require.ErrorIs(t, err, errNoHandler)

	l.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, "/graphql", r.URL.Path)
		require.Equal(t, r.URL.RequestURI(), r.RequestURI)
		require.Equal(t, "Bearer scope-token", r.Header.Get("Authorization"))
		require.NotEmpty(t, r.RemoteAddr)
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		switch string(body) {
		case `{"a":1}`:
			require.Equal(t, "x=1", r.URL.RawQuery)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, `{"data":`+string(body)+`}`)
		case "big":
			w.Header().Set("Content-Type", "application/json")
			_, err := w.Write(bytes.Repeat([]byte("x"), maxResponse))
			require.NoError(t, err)
			_, err = w.Write([]byte("yz"))
			require.ErrorIs(t, err, errTooLong)
		case "panic":
			panic("resolver blew up")
		default:
			t.Errorf("unexpected body %q", body)
		}
	}))

	res, err := post(`{"a":1}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusTeapot, res.StatusCode)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, `{"data":{"a":1}}`, string(raw))

	res, err = postTo("http://127.0.0.1:8080/graphql", "big")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	raw, err = io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Len(t, raw, maxResponse+1, "the caller must see the answer is too long")

	wrote := false
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote = true }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:8080/graphql", strings.NewReader("panic"))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer scope-token")
	_, err = client.Do(req)
	require.ErrorContains(t, err, "resolver blew up")
	require.True(t, wrote, "a request the API began serving counts as sent")
}
