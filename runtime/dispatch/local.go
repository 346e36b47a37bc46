package dispatch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
)

// Local carries a tool's request to the API's own handler in this
// process, where the runtime and the API are one server: the request
// passes through every layer it passes through over the network (the
// scope token's authentication, the limits, the body's bound, the
// metrics, the resolvers), without a loopback connection, its system
// calls and the two sides of net/http around it. A separate replica of
// the API (TOOLGATE_TOOLS_URL) is reached over HTTP as before.
//
// Its zero value refuses every request until Serve names the handler,
// which the server builds after the runtime.
type Local struct {
	h atomic.Pointer[http.Handler]
}

// Serve sends the requests that follow to h.
func (l *Local) Serve(h http.Handler) { l.h.Store(&h) }

// errNoHandler is a request sent before the server named its handler.
var errNoHandler = errors.New("the API is not serving yet")

// RoundTrip implements http.RoundTripper: the request is served by the
// handler in the caller's goroutine, and its answer (at most maxResponse
// bytes and one more, so that the caller sees it is too long) is returned
// whole.
func (l *Local) RoundTrip(req *http.Request) (res *http.Response, err error) {
	h := l.h.Load()
	if h == nil {
		return nil, errNoHandler
	}
	in := req.Clone(req.Context())
	in.RequestURI = req.URL.RequestURI()
	in.RemoteAddr = "127.0.0.1:0"
	in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	if in.Body == nil {
		in.Body = http.NoBody
	}
	// From here the request has reached the API, as a written request has
	// over the network: a failure now may follow what the tool did.
	if t := httptrace.ContextClientTrace(req.Context()); t != nil && t.WroteRequest != nil {
		t.WroteRequest(httptrace.WroteRequestInfo{})
	}
	w := &localResponse{header: http.Header{}}
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("the API failed serving the request: %v", p)
		}
	}()
	(*h).ServeHTTP(w, in)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

// localResponse keeps what the handler answers, up to maxResponse bytes
// and one more; a write beyond fails, as a closed connection would.
type localResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *localResponse) Header() http.Header { return w.header }

func (w *localResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *localResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if room := maxResponse + 1 - w.body.Len(); len(p) > room {
		w.body.Write(p[:max(room, 0)])
		return max(room, 0), errTooLong
	}
	return w.body.Write(p)
}

// errTooLong is a handler's write past what a caller reads of an answer.
var errTooLong = errors.New("the answer is longer than a tool's answer may be")

// Flush implements http.Flusher: the answer is returned whole anyway.
func (w *localResponse) Flush() {}
