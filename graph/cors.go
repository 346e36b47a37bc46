package graph

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/rs/cors"
)

// CORS: which other origins a browser page may call the API from. The
// rules of the Fetch standard (preflights, which headers answer what, Vary)
// are rs/cors's; what is decided here is only which origins are listed,
// and that websockets and Server-Sent Events accept exactly those.

// corsHeaders are the request headers a page may send: the API's own and
// those GraphQL clients (Apollo, urql, Relay, graphql-ws, graphql-sse) and
// browser tracing send.
var corsHeaders = []string{
	"Accept", "Authorization", "Content-Type", "Idempotency-Key", csrfHeader,
	"Apollo-Require-Preflight", "Apollographql-Client-Name", "Apollographql-Client-Version", "X-Apollo-Operation-Name",
	"Traceparent", "Tracestate", "Baggage",
}

// corsExposed are the response headers a page's script may read.
var corsExposed = []string{"Retry-After", "WWW-Authenticate"}

// corsMaxAge is how long, in seconds, a browser may keep a preflight's
// answer: two hours, Chromium's own cap.
const corsMaxAge = 7200

// OriginList is a parsed TOOLGATE_CORS_ORIGINS: exact origins, and origins
// whose host starts with a "*" label standing for any subdomain.
type OriginList struct {
	patterns []originPattern
}

type originPattern struct {
	scheme, host, port string
	// wildcard: host is the suffix after "*." and any subdomain of it
	// (one label or more) matches; never the host itself.
	wildcard bool
}

// ParseOrigins parses a comma-separated list of origins such as
// "http://localhost:3000,https://*.example.com". Each is a scheme, a host
// and an optional port, nothing else; "*" only as the host's first label.
func ParseOrigins(list string) (*OriginList, error) {
	l := &OriginList{}
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		p, err := parseOriginPattern(raw)
		if err != nil {
			return nil, fmt.Errorf("CORS origin %q: %w", raw, err)
		}
		l.patterns = append(l.patterns, p)
	}
	return l, nil
}

func parseOriginPattern(raw string) (originPattern, error) {
	if raw == "*" {
		return originPattern{}, fmt.Errorf("every origin cannot be allowed: list the portal's origins")
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return originPattern{}, fmt.Errorf("want http://HOST[:PORT] or https://HOST[:PORT]")
	}
	p := originPattern{scheme: scheme}
	if strings.HasPrefix(rest, "*.") {
		p.wildcard = true
		rest = rest[2:]
	}
	if strings.ContainsAny(rest, "*/?#@ ") {
		return originPattern{}, fmt.Errorf("an origin is a scheme, a host and a port, nothing more; '*' only as the host's first label (https://*.example.com)")
	}
	u, err := url.Parse(scheme + "://" + rest)
	if err != nil || u.Hostname() == "" {
		return originPattern{}, fmt.Errorf("no host")
	}
	p.host = strings.ToLower(u.Hostname())
	p.port = normalPort(scheme, u.Port())
	if p.wildcard && !strings.Contains(p.host, ".") {
		return originPattern{}, fmt.Errorf("'*' stands for the subdomains of a domain with a dot (https://*.example.com)")
	}
	return p, nil
}

func normalPort(scheme, port string) string {
	switch {
	case port == "" && scheme == "https":
		return "443"
	case port == "" && scheme == "http":
		return "80"
	}
	return port
}

// Empty reports whether no origin is listed: then no other origin is
// allowed at all.
func (l *OriginList) Empty() bool { return l == nil || len(l.patterns) == 0 }

// Allows reports whether a request's Origin header names a listed origin.
func (l *OriginList) Allows(origin string) bool {
	if l.Empty() || origin == "" || origin == "null" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Path != "" || u.RawQuery != "" || u.User != nil || u.Hostname() == "" {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := normalPort(scheme, u.Port())
	for _, p := range l.patterns {
		if p.scheme != scheme || p.port != port {
			continue
		}
		if p.wildcard && strings.HasSuffix(host, "."+p.host) && len(host) > len(p.host)+1 || !p.wildcard && host == p.host {
			return true
		}
	}
	return false
}

// withCORS answers preflights and adds CORS headers for the listed
// origins, with credentials (a session cookie) allowed for them alone; an
// origin not listed gets no Access-Control-* header at all, so the browser
// keeps the answer from its page. A websocket upgrade from another origin
// is refused with 403 unless that origin is listed.
func withCORS(origins *OriginList, next http.Handler) http.Handler {
	c := cors.New(cors.Options{
		AllowOriginVaryRequestFunc: func(_ *http.Request, origin string) (bool, []string) {
			return origins.Allows(origin), nil
		},
		AllowedMethods:   []string{http.MethodGet, http.MethodPost, http.MethodDelete},
		AllowedHeaders:   corsHeaders,
		ExposedHeaders:   corsExposed,
		AllowCredentials: true,
		MaxAge:           corsMaxAge,
	})
	h := next
	if !origins.Empty() {
		h = c.Handler(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isUpgrade(r) {
			origin := r.Header.Get("Origin")
			switch {
			case origin == "" || sameOrigin(r, origin):
				// Not a browser, or the API's own pages (playground,
				// admin console).
			case origins.Allows(origin):
				// coder/websocket checks the origin again, against
				// hosts only; the listed origin was checked here, scheme
				// and port included.
				r = r.Clone(r.Context())
				r.Header.Del("Origin")
			default:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"errors":[{"message":"this origin may not open a websocket: it is not in TOOLGATE_CORS_ORIGINS","extensions":{"code":"FORBIDDEN"}}]}`)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// sameOrigin reports whether origin is the host the request was sent to,
// as coder/websocket's own check has it.
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host, port := u.Hostname(), u.Port()
	rh, rp, err := net.SplitHostPort(r.Host)
	if err != nil {
		rh, rp = r.Host, ""
	}
	return strings.EqualFold(host, rh) && port == rp
}
