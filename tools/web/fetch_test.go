package web_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/web"
)

const article = `<!doctype html><html><head><title>Tides</title></head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article><h1>How tides work</h1>
<p>Tides are the rise and fall of sea levels caused by the combined effects of the gravitational forces exerted by the Moon and the Sun and the rotation of the Earth. Most places in the ocean usually experience two high tides and two low tides each day.</p>
<h2>Spring and neap tides</h2>
<p>When the Sun and Moon are aligned, their pull combines and the tidal range is greatest: these are <a href="https://example.org/spring">spring tides</a>. When they are at right angles the range is smallest, the neap tides, which come twice a month as well.</p>
<ul><li>Spring tides: new and full moon</li><li>Neap tides: first and last quarter</li></ul>
<pre><code>range = high - low</code></pre>
<script>alert("x")</script>
</article>
<footer>Copyright</footer></body></html>`

// site is a loopback page server that counts what it is asked.
type site struct {
	*httptest.Server
	hits    atomic.Int64
	cookies atomic.Int64
}

func newSite(t testing.TB, handler http.HandlerFunc) *site {
	t.Helper()
	s := &site{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/robots.txt" {
			s.hits.Add(1)
		}
		if r.Header.Get("Cookie") != "" || r.Header.Get("Authorization") != "" {
			s.cookies.Add(1)
		}
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "tracked"})
		if r.Header.Get("User-Agent") != web.UserAgent {
			http.Error(w, "no user agent", http.StatusForbidden)
			return
		}
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func loopbackOnly() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} }

// resolver maps names to addresses, as a hostile DNS would.
func resolver(names map[string]string) web.Resolver {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		a, ok := names[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
}

func fetch(t *testing.T, f *web.Fetcher, raw string) (*web.Document, *web.PageError) {
	t.Helper()
	u, err := web.ParseURL(raw)
	if err != nil {
		return nil, &web.PageError{Kind: web.KindError, Msg: err.Error()}
	}
	doc, err := f.Fetch(context.Background(), u)
	if err != nil {
		perr, ok := err.(*web.PageError)
		require.True(t, ok, "%T %v", err, err)
		return nil, perr
	}
	return doc, nil
}

// TestFetchRefusesPrivateAddresses: every refused range, reached by a
// literal address or by a public-looking name that resolves into it, is
// refused naming the rule, and nothing is fetched.
func TestFetchRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		addr string
		want string
	}{
		{"loopback", "127.0.0.1", "loopback address (127.0.0.0/8)"},
		{"loopback elsewhere", "127.9.9.9", "loopback address"},
		{"ten", "10.1.2.3", "private address (10.0.0.0/8)"},
		{"172.16/12", "172.31.255.1", "private address (172.16.0.0/12)"},
		{"192.168/16", "192.168.1.1", "private address (192.168.0.0/16)"},
		{"metadata", "169.254.169.254", "link-local or cloud metadata address (169.254.0.0/16)"},
		{"cgnat", "100.64.0.1", "shared (carrier-grade NAT) address (100.64.0.0/10)"},
		{"unspecified", "0.0.0.0", "unspecified address"},
		{"ipv6 loopback", "::1", "loopback address (::1/128)"},
		{"ula", "fd00:ec2::254", "unique local (private) address (fc00::/7)"},
		{"ipv6 link-local", "fe80::1", "link-local address (fe80::/10)"},
		{"mapped ipv4", "::ffff:10.0.0.1", "private address (10.0.0.0/8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := web.NewFetcher(web.FetcherConfig{Resolve: resolver(map[string]string{"public.example": tt.addr})})
			for _, raw := range []string{
				"http://" + net.JoinHostPort(tt.addr, "80") + "/page",
				"http://public.example/page",
			} {
				_, perr := fetch(t, f, raw)
				require.NotNil(t, perr, raw)
				require.Equal(t, web.KindError, perr.Kind, raw)
				require.Contains(t, perr.Msg, "refused by rule no private addresses", raw)
				require.Contains(t, perr.Msg, tt.want, raw)
			}
		})
	}
}

// TestFetchDNSRebinding: a public name that resolves to loopback is caught
// at dial time; the loopback server, which would answer, hears nothing.
func TestFetchDNSRebinding(t *testing.T) {
	t.Parallel()
	s := newSite(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, article) })
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	f := web.NewFetcher(web.FetcherConfig{Resolve: resolver(map[string]string{"news.example.com": "127.0.0.1"})})
	_, perr := fetch(t, f, "http://news.example.com:"+u.Port()+"/story")
	require.NotNil(t, perr)
	require.Contains(t, perr.Msg, "127.0.0.1 is a loopback address")
	require.Zero(t, s.hits.Load())

	// The same name, allowed by the test-only list, reads: the refusal
	// above was the rule, not the network.
	allowed := web.NewFetcher(web.FetcherConfig{Allow: loopbackOnly(), Resolve: resolver(map[string]string{"news.example.com": "127.0.0.1"})})
	doc, perr := fetch(t, allowed, "http://news.example.com:"+u.Port()+"/story")
	require.Nil(t, perr)
	require.Contains(t, string(doc.Body), "How tides work")
}

// TestFetchAllowListIsExact: 127.0.0.1 allowed does not open 127.0.0.2.
func TestFetchAllowListIsExact(t *testing.T) {
	t.Parallel()
	s := newSite(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, article) })
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	f := web.NewFetcher(web.FetcherConfig{Allow: loopbackOnly()})
	_, perr := fetch(t, f, s.URL+"/a")
	require.Nil(t, perr)
	_, perr = fetch(t, f, "http://127.0.0.2:"+u.Port()+"/a")
	require.NotNil(t, perr)
	require.Contains(t, perr.Msg, "127.0.0.2 is a loopback address")

	allow, err := web.ParseAllow(" 127.0.0.1/32, 10.0.0.5 ,")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.5/32")}, allow)
}

// TestFetchRedirects: every hop is checked; a chain into a private range is
// refused at the hop that enters it, and more than 5 redirects are refused.
func TestFetchRedirects(t *testing.T) {
	t.Parallel()
	var s *site
	s = newSite(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/hop/%d", &n); err == nil && n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
			return
		}
		switch r.URL.Path {
		case "/to-metadata":
			http.Redirect(w, r, "/via", http.StatusMovedPermanently)
		case "/via":
			http.Redirect(w, r, "http://metadata.example/latest/meta-data/", http.StatusFound)
		case "/to-other-loopback":
			http.Redirect(w, r, strings.Replace(s.URL, "127.0.0.1", "127.0.0.2", 1)+"/secret", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		default:
			_, _ = io.WriteString(w, article)
		}
	})
	f := web.NewFetcher(web.FetcherConfig{Allow: loopbackOnly(), Resolve: resolver(map[string]string{"metadata.example": "169.254.169.254"})})
	tests := []struct {
		path string
		want string
	}{
		{"/hop/5", ""},
		{"/hop/6", "refused by rule at most 5 redirects"},
		{"/to-metadata", "169.254.169.254 is a link-local or cloud metadata address"},
		{"/to-other-loopback", "127.0.0.2 is a loopback address"},
		{"/to-file", "refused by rule http and https only"},
	}
	for _, tt := range tests {
		doc, perr := fetch(t, f, s.URL+tt.path)
		if tt.want == "" {
			require.Nil(t, perr, tt.path)
			require.Equal(t, s.URL+"/hop/0", doc.URL.String())
			continue
		}
		require.NotNil(t, perr, tt.path)
		require.Equal(t, web.KindError, perr.Kind, tt.path)
		require.Contains(t, perr.Msg, tt.want, tt.path)
	}
	require.Zero(t, s.cookies.Load(), "no cookie or credential is ever sent back")
}

// TestFetchRules: schemes, credentials, size, time, type, status, robots.
func TestFetchRules(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("<p>tide</p>", 200)
	s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			_, _ = io.WriteString(w, "User-agent: *\nDisallow: /private/\nAllow: /private/open\n")
		case "/big":
			_, _ = io.WriteString(w, big)
		case "/big-chunked":
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, big)
		case "/slow":
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		case "/pdf":
			w.Header().Set("Content-Type", "application/pdf")
			_, _ = io.WriteString(w, "%PDF-1.7")
		case "/gone":
			http.NotFound(w, r)
		case "/broken":
			http.Error(w, "oops", http.StatusBadGateway)
		case "/forbidden":
			http.Error(w, "no", http.StatusForbidden)
		default:
			_, _ = io.WriteString(w, article)
		}
	})
	// Only /slow meets the short bound; every other read gets a bound a
	// loaded machine cannot reach, so its own rule is what answers.
	short := web.NewFetcher(web.FetcherConfig{Allow: loopbackOnly(), MaxBytes: 1000, Timeout: 300 * time.Millisecond})
	f := web.NewFetcher(web.FetcherConfig{Allow: loopbackOnly(), MaxBytes: 1000, Timeout: 10 * time.Second})
	tests := []struct {
		give string
		kind web.Kind
		want string
	}{
		{"file:///etc/passwd", web.KindError, "refused by rule http and https only"},
		{"gopher://127.0.0.1/", web.KindError, "refused by rule http and https only"},
		{strings.Replace(s.URL, "http://", "http://admin:pw@", 1) + "/", web.KindError, "refused by rule no credentials"},
		{s.URL + "/big", web.KindError, "page is larger than 1000 bytes"},
		{s.URL + "/big-chunked", web.KindError, "page is larger than 1000 bytes"},
		{s.URL + "/slow", web.KindOutage, "timed out"},
		{s.URL + "/pdf", web.KindError, "not a web page (application/pdf)"},
		{s.URL + "/gone", web.KindAbsence, "page not found (HTTP 404)"},
		{s.URL + "/broken", web.KindOutage, "site unavailable (HTTP 502)"},
		{s.URL + "/forbidden", web.KindError, "the site refused the read (HTTP 403)"},
		{s.URL + "/private/notes", web.KindError, "refused by rule robots.txt"},
		{s.URL + "/private/open", "", ""},
		{"http://127.0.0.1:1/closed", web.KindOutage, "could not connect"},
	}
	for _, tt := range tests {
		by := f
		if strings.HasSuffix(tt.give, "/slow") {
			by = short
		}
		_, perr := fetch(t, by, tt.give)
		if tt.want == "" {
			require.Nil(t, perr, tt.give)
			continue
		}
		require.NotNil(t, perr, tt.give)
		require.Equal(t, tt.kind, perr.Kind, tt.give+": "+perr.Msg)
		require.Contains(t, perr.Msg, tt.want, tt.give)
	}
	require.Zero(t, s.cookies.Load())
}

// TestFetchRobotsUnreadable: a robots.txt that errors disallows the site,
// as RFC 9309 asks; a missing one allows it.
func TestFetchRobotsUnreadable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		kind   web.Kind
	}{
		{http.StatusInternalServerError, web.KindOutage},
		{http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				w.WriteHeader(tt.status)
				return
			}
			_, _ = io.WriteString(w, article)
		})
		_, perr := fetch(t, web.NewFetcher(web.FetcherConfig{Allow: loopbackOnly()}), s.URL+"/page")
		if tt.kind == "" {
			require.Nil(t, perr)
			continue
		}
		require.NotNil(t, perr)
		require.Equal(t, tt.kind, perr.Kind)
		require.Contains(t, perr.Msg, "robots.txt could not be read")
		require.Zero(t, s.hits.Load())
	}
}
