package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/tools"
)

// Limits of one page read.
const (
	// MaxRedirects is the most redirects a page read follows.
	MaxRedirects = 5
	// DefaultMaxBytes caps the body read of a page.
	DefaultMaxBytes = 2 << 20
	// DefaultPageTimeout bounds one page read, redirects and robots.txt included.
	DefaultPageTimeout = 10 * time.Second
	// UserAgent is sent with every request; its product token is the one
	// robots.txt groups are matched against.
	UserAgent   = "toolgate-web/1.0 (reads public pages a user's assistant asked for; honours robots.txt)"
	robotsToken = "toolgate-web"
)

// Resolver looks up the addresses of a host name. Tests substitute one to
// make a public-looking name resolve to a private address.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// FetcherConfig configures a Fetcher; zero values take the defaults.
type FetcherConfig struct {
	// Allow are private ranges reachable anyway: for tests only, never in
	// production (TOOLGATE_WEB_ALLOW_PRIVATE).
	Allow []netip.Prefix
	// Resolve replaces the system's DNS.
	Resolve  Resolver
	MaxBytes int64
	Timeout  time.Duration
}

// Fetcher reads public web pages safely: every address it dials is checked
// at dial time (after DNS, on every redirect hop, so a name that rebinds to
// a private address is caught at the socket), only http and https, no
// cookies, no credentials, no proxy, a capped body, at most MaxRedirects
// redirects, a deadline, and robots.txt.
type Fetcher struct {
	policy   Policy
	resolve  Resolver
	maxBytes int64
	timeout  time.Duration
	client   *http.Client
	robots   *robotsCache
}

// NewFetcher returns a Fetcher.
func NewFetcher(cfg FetcherConfig) *Fetcher {
	f := &Fetcher{
		policy:   Policy{allow: cfg.Allow},
		resolve:  cfg.Resolve,
		maxBytes: cfg.MaxBytes,
		timeout:  cfg.Timeout,
		robots:   newRobotsCache(),
	}
	if f.resolve == nil {
		f.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if f.maxBytes <= 0 {
		f.maxBytes = DefaultMaxBytes
	}
	if f.timeout <= 0 {
		f.timeout = DefaultPageTimeout
	}
	f.client = &http.Client{
		Transport: &http.Transport{
			// Never a proxy: it would dial for us, past the address checks.
			Proxy:                 nil,
			DialContext:           f.dial,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: f.timeout,
			MaxIdleConns:          32,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: f.checkRedirect,
		// No Jar: no cookie is kept or sent.
	}
	return f
}

// dial resolves the host itself, refuses if any address is refused, and
// dials only the addresses it checked; Control checks the socket's address
// again, so nothing but a checked address is ever connected to.
func (f *Fetcher) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("split address: %w", err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("parse port: %w", err)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = f.resolve(ctx, host); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	for _, a := range addrs {
		if err := f.policy.Check(a); err != nil {
			return nil, err
		}
	}
	d := net.Dialer{Timeout: 5 * time.Second, Control: f.control}
	var last error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(p)).String())
		if err == nil {
			return conn, nil
		}
		last = err
	}
	return nil, last
}

// control is the last word: the address the socket is about to connect to.
func (f *Fetcher) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Refused{Rule: "no private addresses", Reason: "unparsable address " + address}
	}
	return f.policy.Check(ap.Addr())
}

func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return &Refused{Rule: "at most 5 redirects", Reason: fmt.Sprintf("%s redirected more than %d times", via[0].URL, MaxRedirects)}
	}
	if n := utf8.RuneCountInString(req.URL.String()); n > MaxURLChars {
		// The address read is part of what the model receives.
		return &Refused{Rule: fmt.Sprintf("addresses of at most %d characters", MaxURLChars), Reason: fmt.Sprintf("%s redirected to an address of %d characters", via[0].URL, n)}
	}
	if err := checkURL(req.URL); err != nil {
		return err
	}
	if req.URL.Path == "/robots.txt" {
		return nil
	}
	return f.robotsAllow(req.Context(), req.URL)
}

// checkURL refuses what no fetch may ask for, before any dial.
func checkURL(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return &Refused{Rule: "http and https only", Reason: fmt.Sprintf("scheme %q", u.Scheme)}
	case u.User != nil:
		return &Refused{Rule: "no credentials", Reason: "the address carries a user name or password"}
	case u.Hostname() == "":
		return &Refused{Rule: "http and https only", Reason: "the address names no host"}
	}
	// Addresses, literal or resolved, are checked at dial time, where the
	// allow-list applies.
	return nil
}

// ParseURL parses a page address and refuses what the rules forbid.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, &Refused{Rule: "http and https only", Reason: "not a URL: " + err.Error()}
	}
	if err := checkURL(u); err != nil {
		return nil, err
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// Document is a page as fetched.
type Document struct {
	// URL is where the page was read, after redirects.
	URL         *url.URL
	ContentType string
	Body        []byte
}

// PageError is a page that could not be read, with the kind of failure it
// is: ABSENCE (the page is not there), OUTAGE (it could not be reached),
// ERROR (it was reached and refused, or is not a page we read, or a rule
// refused it).
type PageError struct {
	Kind Kind
	Msg  string
	// cause is what went wrong, a *tools.Transient when it is worth
	// another attempt.
	cause error
}

func (e *PageError) Error() string { return e.Msg }

// Unwrap returns what went wrong.
func (e *PageError) Unwrap() error { return e.cause }

// refused reports whether a rule of the page rules refused the read
// (rather than the site, or the network).
func (e *PageError) refused() bool {
	var ref *Refused
	return errors.As(e.cause, &ref)
}

// Fetch reads the page at u, if the site's robots.txt allows it. Its
// error is always a *PageError.
func (f *Fetcher) Fetch(ctx context.Context, u *url.URL) (*Document, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := checkURL(u); err != nil {
		return nil, classify(u, err)
	}
	if err := f.robotsAllow(ctx, u); err != nil {
		return nil, classify(u, err)
	}
	doc, err := f.get(ctx, u, f.maxBytes, []string{"text/html", "application/xhtml+xml", "text/plain"})
	if err != nil {
		return nil, classify(u, err)
	}
	return doc, nil
}

type statusError struct {
	code   int
	header http.Header
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d", e.code) }

type contentError struct{ msg string }

func (e *contentError) Error() string { return e.msg }

func (f *Fetcher) get(ctx context.Context, u *url.URL, maxBytes int64, types []string) (*Document, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.8")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &statusError{code: resp.StatusCode, header: resp.Header}
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if types != nil && ct != "" && !contains(types, ct) {
		return nil, &contentError{fmt.Sprintf("not a web page (%s)", ct)}
	}
	if resp.ContentLength > maxBytes {
		return nil, &contentError{fmt.Sprintf("page is larger than %d bytes", maxBytes)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > maxBytes {
		return nil, &contentError{fmt.Sprintf("page is larger than %d bytes", maxBytes)}
	}
	return &Document{URL: resp.Request.URL, ContentType: ct, Body: body}, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// classify turns what went wrong into a PageError with its kind and a
// message the model can act on; nothing internal leaks. A failure that
// tends to pass (a 429, 502, 503 or 504; a connection refused or dropped)
// is marked worth another attempt. A timeout is not: the read already
// spent its whole deadline, and repeating it would spend the call's.
func classify(u fmt.Stringer, err error) *PageError {
	var (
		ref    *Refused
		status *statusError
		cerr   *contentError
		perr   *PageError
		netErr net.Error
		dnsErr *net.DNSError
	)
	switch {
	case errors.As(err, &perr):
		return perr
	case errors.As(err, &ref):
		return &PageError{Kind: KindError, Msg: fmt.Sprintf("%s not read: %s", u, ref.Error()), cause: err}
	case errors.As(err, &status) && (status.code == http.StatusNotFound || status.code == http.StatusGone):
		return &PageError{Kind: KindAbsence, Msg: fmt.Sprintf("%s: page not found (%s)", u, status), cause: err}
	case errors.As(err, &status) && (status.code >= 500 || status.code == http.StatusTooManyRequests || status.code == http.StatusRequestTimeout):
		if passing(status.code) {
			err = &tools.Transient{Err: err, Header: status.header}
		}
		return &PageError{Kind: KindOutage, Msg: fmt.Sprintf("%s: site unavailable (%s)", u, status), cause: err}
	case errors.As(err, &status):
		return &PageError{Kind: KindError, Msg: fmt.Sprintf("%s: the site refused the read (%s)", u, status), cause: err}
	case errors.As(err, &cerr):
		return &PageError{Kind: KindError, Msg: fmt.Sprintf("%s: %s", u, cerr.msg), cause: err}
	case errors.As(err, &dnsErr):
		return &PageError{Kind: KindOutage, Msg: fmt.Sprintf("%s: host %s not found", u, dnsErr.Name), cause: err}
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return &PageError{Kind: KindOutage, Msg: fmt.Sprintf("%s: timed out", u), cause: err}
	default:
		if dropped(err) {
			err = &tools.Transient{Err: err}
		}
		return &PageError{Kind: KindOutage, Msg: fmt.Sprintf("%s: could not connect", u), cause: err}
	}
}

// passing reports whether an HTTP status says the trouble tends to pass:
// the statuses the runtime retries its own tool calls on.
func passing(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// dropped reports whether a request failed because the connection was
// refused or dropped before an answer: worth another attempt, where a
// timeout, a name that does not resolve or a refused address is not.
func dropped(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
