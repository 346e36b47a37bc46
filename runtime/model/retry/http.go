package retry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
// the SDK parses it, then hands the SDK the same bytes. It lets [Do] report
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

// maxRetryAfter bounds what is read from a header before conversion, so a
// silly value cannot overflow a Duration; Policy.Max caps it far lower.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads the wait a server asked for: retry-after-ms (OpenAI),
// or Retry-After in seconds or as an HTTP date, which is measured from the
// answer's own Date so no clock is involved when the server sends one.
func retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(min(ms, float64(maxRetryAfter/time.Millisecond)) * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, maxRetryAfter.Seconds()) * float64(time.Second))
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	now := time.Now()
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		now = d
	}
	return min(max(at.Sub(now), 0), maxRetryAfter)
}
