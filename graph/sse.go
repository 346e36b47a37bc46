package graph

import (
	"context"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/toolgate/toolgate/graph/auth"
)

// sse serves subscriptions over Server-Sent Events, the graphql-sse
// protocol's distinct connections mode (a POST with Accept:
// text/event-stream answered by one stream of "next" events, then
// "complete"), for clients behind proxies that block websockets. It is
// gqlgen's transport with what the websocket has here: the request is
// authenticated like any other (its Authorization header), and its
// subscription counts against the token's cap.
type sse struct{ transport.SSE }

func (t sse) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	rc := http.NewResponseController(w)
	// The stream lasts as long as its turn: the server's read timeout,
	// which bounds how long a request takes to arrive, must not cut it.
	_ = rc.SetReadDeadline(time.Time{})
	token, _ := auth.Bearer(r.Header.Get("Authorization"))
	s := &socket{}
	s.initialised(token)
	r = r.WithContext(context.WithValue(r.Context(), socketKey{}, s))
	t.SSE.Do(flusher{ResponseWriter: w, rc: rc}, r, exec)
}

// flusher flushes through the writers wrapped around the connection's.
type flusher struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (f flusher) Flush() { _ = f.rc.Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (f flusher) Unwrap() http.ResponseWriter { return f.ResponseWriter }
