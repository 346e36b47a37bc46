package retry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter bounds what is read from a header before conversion, so a
// silly value cannot overflow a Duration; Policy.Max caps it far lower.
const maxRetryAfter = 24 * time.Hour

// After reads the wait a server asked for: Retry-After-Ms (OpenAI), or
// Retry-After in seconds or as an HTTP date, which is measured from the
// answer's own Date so no clock is involved when the server sends one.
func After(h http.Header) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(min(ms, float64(maxRetryAfter/time.Millisecond)) * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
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
