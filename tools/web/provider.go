package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/tools"
)

// Hit is one search result.
type Hit struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// Provider is a web search service. Search returns at most n hits for
// query, best first; no hits and no error is an absence. An error means
// the search did not run (an outage), unless it is a *MalformedError: it
// ran and answered something unreadable. An error worth another attempt
// is a *tools.Transient.
type Provider interface {
	// Name is the provider's configuration name, e.g. "searxng".
	Name() string
	Search(ctx context.Context, query string, n int) ([]Hit, error)
}

// MalformedError is a provider answer that could not be read.
type MalformedError struct{ Err error }

func (e *MalformedError) Error() string { return "read search answer: " + e.Err.Error() }

func (e *MalformedError) Unwrap() error { return e.Err }

// Provider names, as TOOLGATE_WEB_PROVIDER takes them.
const (
	SearXNG = "searxng"
	Brave   = "brave"
	Tavily  = "tavily"
)

// Default endpoints of the commercial providers.
const (
	BraveURL  = "https://api.search.brave.com/res/v1/web/search"
	TavilyURL = "https://api.tavily.com/search"
)

const (
	providerTimeout  = 10 * time.Second
	providerMaxBytes = 2 << 20
)

// NewProvider returns the provider named name, at endpoint (empty: the
// provider's public endpoint; SearXNG has none and needs one), with key.
// client is the HTTP client to use; nil gives one with a deadline and no
// cookies. The endpoint is the operator's, so it is not held to the page
// rules: a self-hosted SearXNG on a private network is the usual setup.
func NewProvider(name, endpoint, key string, client *http.Client) (Provider, error) {
	if client == nil {
		client = &http.Client{Timeout: providerTimeout}
	}
	base := httpProvider{client: client, key: key}
	var err error
	switch strings.ToLower(strings.TrimSpace(name)) {
	case SearXNG:
		if endpoint == "" {
			return nil, errors.New("configure searxng: TOOLGATE_WEB_PROVIDER_URL is required (the instance's base URL)")
		}
		base.endpoint, err = endpointURL(endpoint)
		return &searxng{base}, err
	case Brave:
		if key == "" {
			return nil, errors.New("configure brave: TOOLGATE_WEB_PROVIDER_KEY is required")
		}
		base.endpoint, err = endpointURL(or(endpoint, BraveURL))
		return &brave{base}, err
	case Tavily:
		if key == "" {
			return nil, errors.New("configure tavily: TOOLGATE_WEB_PROVIDER_KEY is required")
		}
		base.endpoint, err = endpointURL(or(endpoint, TavilyURL))
		return &tavily{base}, err
	}
	return nil, fmt.Errorf("configure web provider: unknown provider %q (searxng, brave or tavily)", name)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func endpointURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("configure web provider: TOOLGATE_WEB_PROVIDER_URL %q is not an http(s) URL", s)
	}
	return u, nil
}

type httpProvider struct {
	client   *http.Client
	endpoint *url.URL
	key      string
}

// do sends req and decodes a 2xx JSON answer into out.
func (p httpProvider) do(req *http.Request, out any) error {
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		err = fmt.Errorf("reach search provider: %w", err)
		if dropped(err) {
			return &tools.Transient{Err: err}
		}
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, providerMaxBytes))
	if err != nil {
		return fmt.Errorf("read search answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("search provider answered HTTP %d", resp.StatusCode)
		if passing(resp.StatusCode) {
			return &tools.Transient{Err: err, Header: resp.Header}
		}
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &MalformedError{Err: err}
	}
	return nil
}

// searxng speaks SearXNG's JSON API: GET /search?q=…&format=json (the
// instance must list json under search.formats).
type searxng struct{ httpProvider }

func (*searxng) Name() string { return SearXNG }

func (p *searxng) Search(ctx context.Context, query string, n int) ([]Hit, error) {
	u := p.endpoint.JoinPath("search")
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}, "safesearch": {"1"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build search request: %w", err)
	}
	var out struct {
		Results []struct {
			URL     string `json:"url"`
			Title   string `json:"title"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := p.do(req, &out); err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, min(n, len(out.Results)))
	for _, r := range out.Results {
		hits = appendHit(hits, n, r.Title, r.URL, r.Content)
	}
	return hits, nil
}

// brave speaks the Brave Search API: GET /res/v1/web/search?q=…&count=…
// with the key in X-Subscription-Token.
type brave struct{ httpProvider }

func (*brave) Name() string { return Brave }

func (p *brave) Search(ctx context.Context, query string, n int) ([]Hit, error) {
	u := *p.endpoint
	u.RawQuery = url.Values{"q": {query}, "count": {strconv.Itoa(n)}, "safesearch": {"moderate"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build search request: %w", err)
	}
	req.Header.Set("X-Subscription-Token", p.key)
	var out struct {
		Web struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := p.do(req, &out); err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, min(n, len(out.Web.Results)))
	for _, r := range out.Web.Results {
		hits = appendHit(hits, n, r.Title, r.URL, r.Description)
	}
	return hits, nil
}

// tavily speaks the Tavily Search API: POST /search with a JSON body and
// the key as a bearer token.
type tavily struct{ httpProvider }

func (*tavily) Name() string { return Tavily }

func (p *tavily) Search(ctx context.Context, query string, n int) ([]Hit, error) {
	body, err := json.Marshal(map[string]any{"query": query, "max_results": n, "search_depth": "basic"})
	if err != nil {
		return nil, fmt.Errorf("encode search request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build search request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.key)
	var out struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := p.do(req, &out); err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, min(n, len(out.Results)))
	for _, r := range out.Results {
		hits = appendHit(hits, n, r.Title, r.URL, r.Content)
	}
	return hits, nil
}

var tags = regexp.MustCompile(`<[^>]*>`)

// maxSnippet bounds what one hit's snippet costs.
const maxSnippet = 300

// appendHit adds a hit with an http(s) URL, its snippet stripped of the
// markup some providers put in (Brave's <strong>) and cut to maxSnippet.
func appendHit(hits []Hit, n int, title, link, snippet string) []Hit {
	if len(hits) >= n {
		return hits
	}
	u, err := url.Parse(link)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return hits
	}
	clean := func(s string) string {
		return strings.Join(strings.Fields(html.UnescapeString(tags.ReplaceAllString(s, ""))), " ")
	}
	return append(hits, Hit{Title: clean(title), URL: link, Snippet: cut(clean(snippet), maxSnippet)})
}

// cut returns s cut to at most n characters, with an ellipsis when cut.
func cut(s string, n int) string {
	if utf8Count(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
