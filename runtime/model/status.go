package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/runtime/retry"
)

// Call runs one model call through the runtime's retry loop: 429, 5xx and
// dropped connections are retried with the policy's doubling waits,
// honouring Retry-After, and every other HTTP error answer becomes one clear
// *StatusError, whatever the SDK made of the body. Provider names the
// provider in errors ("openai: 401 Unauthorized: …"). Each attempt's context
// carries a recorder that [Middleware] fills, so the SDK clients used by
// call must be built with that middleware and with their own retries off.
func Call[T any](ctx context.Context, p retry.Policy, provider string, call func(ctx context.Context) (T, error)) (T, error) {
	var v T
	_, err := retry.Do(ctx, p, classifier, func(ctx context.Context) error {
		rec := &record{}
		got, err := call(context.WithValue(ctx, recordKey{}, rec))
		if err != nil {
			return describe(provider, rec, err)
		}
		v = got
		return nil
	})
	if err != nil {
		var zero T
		if ctx.Err() != nil {
			return zero, fmt.Errorf("%s: %w", provider, ctx.Err())
		}
		return zero, err
	}
	return v, nil
}

// attemptError is one failed attempt, described, with what the retry
// loop needs to judge it.
type attemptError struct {
	err        error
	temporary  bool
	retryAfter time.Duration
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

func classifier(err error) retry.Verdict {
	var a *attemptError
	if !errors.As(err, &a) {
		return retry.Verdict{}
	}
	return retry.Verdict{Retry: a.temporary, After: a.retryAfter}
}

// describe turns an attempt's error into the error the caller sees, noting
// whether it is worth another try and how long the server asked us to wait.
func describe(provider string, rec *record, err error) error {
	if rec.status >= 400 {
		serr := &StatusError{
			Provider:   provider,
			StatusCode: rec.status,
			Message:    messageOf(rec.body),
			RetryAfter: retry.After(rec.header),
		}
		return &attemptError{err: serr, temporary: Temporary(rec.status), retryAfter: serr.RetryAfter}
	}
	var serr *StatusError
	if errors.As(err, &serr) {
		return &attemptError{err: err, temporary: Temporary(serr.StatusCode), retryAfter: serr.RetryAfter}
	}
	return &attemptError{err: fmt.Errorf("%s: %w", provider, err), temporary: connectionError(err)}
}

// Temporary reports whether an HTTP status is worth retrying: rate limits,
// and server trouble that tends to pass (529 is Anthropic's "overloaded").
func Temporary(status int) bool {
	switch status {
	case 429, 500, 502, 503, 504, 529:
		return true
	}
	return false
}

// connectionError reports whether err is the network failing rather than
// the server answering: worth a retry, since nothing was answered.
func connectionError(err error) bool {
	var uerr *url.Error
	var oerr *net.OpError
	return errors.As(err, &uerr) || errors.As(err, &oerr) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, ErrTruncated)
}

// ErrTruncated is what providers report when a streamed answer ends before
// its end marker: the connection dropped, so the call is retried.
var ErrTruncated = errors.New("stream ended before the answer was complete")

// StatusError is an HTTP error answer from a provider.
type StatusError struct {
	// Provider is the provider's configuration name, e.g. "openai".
	Provider   string
	StatusCode int
	// Message is the provider's own explanation, from the answer's body.
	Message string
	// RetryAfter is the wait the server asked for; 0 when it asked none.
	RetryAfter time.Duration
}

// Error reads like "openai: 401 Unauthorized: Incorrect API key provided".
func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.Provider, e.StatusCode, statusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// statusText knows the one status the standard library does not.
func statusText(code int) string {
	if code == 529 {
		return "Overloaded"
	}
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Error"
}

// maxErrorBody bounds how much of an error answer is kept; provider error
// bodies are small, and a proxy's HTML page need not be read whole.
const maxErrorBody = 64 << 10

// record is what [Middleware] saw of one attempt's error answer.
type record struct {
	status int
	header http.Header
	body   []byte
}

type recordKey struct{}

// Middleware records an HTTP error answer in the attempt's context before
// the SDK parses it, then hands the SDK the same bytes. It lets [Call] report
// the status and the provider's message even when the body is not in the
// shape the SDK expects (a proxy's HTML page, `{"error": "text"}`). Its
// signature matches both SDKs' option.Middleware.
func Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	rec, ok := req.Context().Value(recordKey{}).(*record)
	if !ok {
		return res, nil
	}
	body, rerr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close()
	rec.status, rec.header, rec.body = res.StatusCode, res.Header, body
	res.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		// The status is known; a body cut short changes only the message.
		rec.body = append(rec.body, []byte(" (body unreadable)")...)
	}
	return res, nil
}

// maxMessage bounds the message kept from an error body.
const maxMessage = 500

// messageOf finds the human explanation in an error body: the usual
// `{"error": {"message": …}}`, the shapes OpenAI-compatible servers use
// instead, or the text itself.
func messageOf(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var text string
		switch {
		case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
			return clip(inner.Message)
		case json.Unmarshal(v.Error, &text) == nil && text != "":
			return clip(text)
		case v.Message != "":
			return clip(v.Message)
		case json.Unmarshal(v.Detail, &text) == nil && text != "":
			return clip(text)
		}
	}
	return clip(string(body))
}

// clip makes a message one line of bounded length.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		s = s[:maxMessage] + "…"
	}
	return s
}
