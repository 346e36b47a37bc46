package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/web"
)

// testBundle is a SearXNG instance and a site of pages, both on loopback,
// and the service reading them.
type testBundle struct {
	svc   *web.Service
	site  *site
	pages atomic.Int64
	// results maps a query to the paths of its hits; "down" makes the
	// instance fail, a query not listed finds nothing.
	results map[string][]string
}

func setup(t testing.TB, results map[string][]string, page http.HandlerFunc) *testBundle {
	t.Helper()
	b := &testBundle{results: results}
	b.site = newSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		b.pages.Add(1)
		page(w, r)
	})
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		if q == "down" {
			http.Error(w, "engines unavailable", http.StatusServiceUnavailable)
			return
		}
		type result struct {
			URL     string   `json:"url"`
			Title   string   `json:"title"`
			Content string   `json:"content"`
			Engine  string   `json:"engine"`
			Engines []string `json:"engines"`
			Score   float64  `json:"score"`
		}
		out := struct {
			Query   string   `json:"query"`
			Results []result `json:"results"`
		}{Query: q, Results: []result{}}
		for i, p := range b.results[q] {
			out.Results = append(out.Results, result{URL: b.site.URL + p, Title: "Page " + p, Content: "about " + q, Engine: "brave", Engines: []string{"brave"}, Score: float64(10 - i)})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(searx.Close)
	var err error
	b.svc, err = web.New(web.Config{Provider: "searxng", URL: searx.URL, AllowPrivate: "127.0.0.1/32", Client: searx.Client()})
	require.NoError(t, err)
	return b
}

func articlePage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/dead" {
		http.NotFound(w, r)
		return
	}
	_, _ = io.WriteString(w, strings.Replace(article, "How tides work", "Tides at "+r.URL.Path, 1))
}

func ptr(n int) *int { return &n }

// TestResearch: queries answered in order; an absence and an outage told
// apart per query; one dead link of three keeps the two pages that read.
func TestResearch(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string][]string{
		"tides":      {"/a", "/dead", "/c"},
		"moon phase": {"/dead", "/m"},
	}, articlePage)
	got, err := b.svc.Research(context.Background(), []string{"tides", "nothing here", "down", "moon phase"}[:3], ptr(3))
	require.NoError(t, err)
	require.Len(t, got.Results, 3)
	for i, q := range []string{"tides", "nothing here", "down"} {
		require.Equal(t, q, got.Results[i].Query)
	}
	require.Len(t, got.Results[0].Hits, 3)
	require.Equal(t, web.Hit{Title: "Page /a", URL: b.site.URL + "/a", Snippet: "about tides"}, got.Results[0].Hits[0])
	// The first query's three hits are read: /a and /c stand, /dead fails.
	require.Len(t, got.Results[0].Pages, 2)
	require.Equal(t, b.site.URL+"/a", got.Results[0].Pages[0].URL)
	require.Equal(t, b.site.URL+"/c", got.Results[0].Pages[1].URL)
	require.Contains(t, got.Results[0].Pages[0].Text, "# Tides at /a")
	require.Equal(t, []schematype.ItemFailure{
		{Item: 1, Input: "nothing here", Kind: web.KindAbsence, Message: "the search ran and found nothing"},
		{Item: 2, Input: "down", Kind: web.KindOutage, Message: "search did not run: search provider answered HTTP 503"},
		{Item: 0, Input: b.site.URL + "/dead", Kind: web.KindAbsence, Message: b.site.URL + "/dead: page not found (HTTP 404)"},
	}, got.Failures)
	require.EqualValues(t, 3, b.pages.Load())
	require.False(t, web.Definitions[0].Absent(mustJSON(t, got)))

	// Pages are shared out across queries, best hit first, each URL once.
	b.pages.Store(0)
	got, err = b.svc.Research(context.Background(), []string{"tides", "moon phase"}, ptr(3))
	require.NoError(t, err)
	require.Equal(t, []string{b.site.URL + "/a"}, urls(got.Results[0].Pages))
	require.Equal(t, []string{b.site.URL + "/m"}, urls(got.Results[1].Pages))
	require.Len(t, got.Failures, 1)
	require.Equal(t, b.site.URL+"/dead", got.Failures[0].Input)
	require.EqualValues(t, 3, b.pages.Load())

	// A call in which no query found a hit gave no hits, whatever its
	// queries' failures were: those say, query by query, what it was.
	got, err = b.svc.Research(context.Background(), []string{"nothing here"}, nil)
	require.NoError(t, err)
	require.True(t, web.Definitions[0].Absent(mustJSON(t, got)))
	got, err = b.svc.Research(context.Background(), []string{"nothing here", "down"}, nil)
	require.NoError(t, err)
	require.True(t, web.Definitions[0].Absent(mustJSON(t, got)))
	require.Equal(t, []schematype.FailureKind{web.KindAbsence, web.KindOutage}, []schematype.FailureKind{got.Failures[0].Kind, got.Failures[1].Kind})
	got, err = b.svc.Research(context.Background(), []string{"tides", "down"}, ptr(0))
	require.NoError(t, err)
	require.False(t, web.Definitions[0].Absent(mustJSON(t, got)), "one query's hits are hits")
}

// retryFour is the server's retry loop as the family sees it: a
// *tools.Transient is tried again, four attempts in all, without waits.
func retryFour(ctx context.Context, try func(context.Context) error) error {
	var err error
	for range 4 {
		var transient *tools.Transient
		if err = try(ctx); !errors.As(err, &transient) {
			return err
		}
	}
	return err
}

// TestRequestsRetriedAndCounted: a search and a page read that failed in
// a way worth repeating are tried again through the retry loop the
// service was given, and the attempts are recorded for the call; what is
// not worth repeating (a 404, a 500, a refused address) is tried once.
func TestRequestsRetriedAndCounted(t *testing.T) {
	t.Parallel()
	var failSearch, failPage atomic.Int32
	var searches, pages atomic.Int32
	site := newSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		pages.Add(1)
		switch {
		case r.URL.Path == "/gone":
			http.NotFound(w, r)
		case r.URL.Path == "/broken":
			http.Error(w, "bug", http.StatusInternalServerError)
		case failPage.Add(-1) >= 0:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		default:
			_, _ = io.WriteString(w, article)
		}
	})
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		searches.Add(1)
		if failSearch.Add(-1) >= 0 {
			http.Error(w, "engines busy", http.StatusTooManyRequests)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": []map[string]any{{"url": site.URL + "/a", "title": "A", "content": "about tides"}}})
	}))
	t.Cleanup(searx.Close)
	svc, err := web.New(web.Config{Provider: "searxng", URL: searx.URL, AllowPrivate: "127.0.0.1/32", Client: searx.Client(), Retry: retryFour})
	require.NoError(t, err)
	count := func(f func(ctx context.Context)) int {
		ctx, attempts := tools.WithAttempts(context.Background())
		f(ctx)
		return attempts.N()
	}

	// Two 429s from the provider, two 503s from the page: then both answer.
	failSearch.Store(2)
	failPage.Store(2)
	n := count(func(ctx context.Context) {
		got, err := svc.Research(ctx, []string{"tides"}, ptr(1))
		require.NoError(t, err)
		require.Empty(t, got.Failures)
		require.Len(t, got.Results[0].Pages, 1)
	})
	require.Equal(t, 3, n)
	require.EqualValues(t, 3, searches.Load())
	require.EqualValues(t, 3, pages.Load())

	// Down for good: four attempts, then an outage, on the item and on read_page.
	failSearch.Store(4)
	searches.Store(0)
	n = count(func(ctx context.Context) {
		got, err := svc.Research(ctx, []string{"tides"}, nil)
		require.NoError(t, err)
		require.Equal(t, []schematype.ItemFailure{{Item: 0, Input: "tides", Kind: web.KindOutage, Message: "search did not run: search provider answered HTTP 429"}}, got.Failures)
	})
	require.Equal(t, 4, n)
	require.EqualValues(t, 4, searches.Load())
	failPage.Store(4)
	pages.Store(0)
	n = count(func(ctx context.Context) {
		_, err := svc.ReadPage(ctx, site.URL+"/a", nil, nil)
		var outage *tools.Outage
		require.ErrorAs(t, err, &outage)
		require.EqualError(t, err, site.URL+"/a: site unavailable (HTTP 503)")
	})
	require.Equal(t, 4, n)
	require.EqualValues(t, 4, pages.Load())

	// Not worth repeating: asked once, each in its own terms.
	tests := []struct {
		path  string
		check func(error) bool
	}{
		{"/gone", func(err error) bool { var a *tools.Absence; return errors.As(err, &a) }},
		{"/broken", func(err error) bool { var o *tools.Outage; return errors.As(err, &o) }},
	}
	for _, tt := range tests {
		pages.Store(0)
		n = count(func(ctx context.Context) {
			_, err := svc.ReadPage(ctx, site.URL+tt.path, nil, nil)
			require.True(t, tt.check(err), "%s: %T %v", tt.path, err, err)
		})
		require.Equal(t, 1, n, tt.path)
		require.EqualValues(t, 1, pages.Load(), tt.path)
	}
}

// TestReadPageFailuresInTheirTerms: a page the site refuses, or that is no
// page, ran and failed; one a rule refuses never ran.
func TestReadPageFailuresInTheirTerms(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/forbidden":
			http.Error(w, "no", http.StatusForbidden)
		case "/pdf":
			w.Header().Set("Content-Type", "application/pdf")
			_, _ = io.WriteString(w, "%PDF-1.7")
		}
	})
	for _, path := range []string{"/forbidden", "/pdf"} {
		_, err := b.svc.ReadPage(context.Background(), b.site.URL+path, nil, nil)
		var failure *tools.Failure
		require.ErrorAs(t, err, &failure, path)
	}
	_, err := b.svc.ReadPage(context.Background(), "http://169.254.169.254/latest/meta-data/", nil, nil)
	var refusal *tools.Refusal
	require.ErrorAs(t, err, &refusal)
}

// TestReadPageBoundsWhatItReturns: read_page's answer passes to the model
// whole, so every part of it is bounded: the window by maxChars, the
// title by MaxTitleChars, the address read by MaxURLChars (a redirect to
// a longer one is refused).
func TestReadPageBoundsWhatItReturns(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/far":
			http.Redirect(w, r, "/"+strings.Repeat("x", web.MaxURLChars), http.StatusFound)
		default:
			_, _ = io.WriteString(w, "<html><head><title>"+strings.Repeat("Tides ", 2_000)+"</title></head><body><article><p>"+
				strings.Repeat("The tide comes in twice a day. ", 100)+"</p></article></body></html>")
		}
	})
	p, err := b.svc.ReadPage(context.Background(), b.site.URL+"/page", nil, ptr(web.ReadMinChars))
	require.NoError(t, err)
	require.LessOrEqual(t, utf8.RuneCountInString(p.Title), web.MaxTitleChars)
	require.True(t, strings.HasPrefix(p.Title, "Tides Tides"))
	require.Equal(t, web.ReadMinChars, utf8.RuneCountInString(p.Text))
	_, err = b.svc.ReadPage(context.Background(), b.site.URL+"/far", nil, nil)
	var refusal *tools.Refusal
	require.ErrorAs(t, err, &refusal)
	require.ErrorContains(t, err, "refused by rule addresses of at most 2048 characters")
}

// TestResearchPageLimit: at most 3 pages in all, whatever the hits; the
// default reads 2; 0 reads none.
func TestResearchPageLimit(t *testing.T) {
	t.Parallel()
	many := []string{"/1", "/2", "/3", "/4", "/5"}
	b := setup(t, map[string][]string{"a": many, "b": many, "c": many}, articlePage)
	tests := []struct {
		give *int
		want int64
	}{
		{ptr(3), 3},
		{nil, web.DefaultPages},
		{ptr(0), 0},
	}
	for _, tt := range tests {
		b.pages.Store(0)
		got, err := b.svc.Research(context.Background(), []string{"a", "b", "c"}, tt.give)
		require.NoError(t, err)
		read := 0
		for _, r := range got.Results {
			read += len(r.Pages)
			require.Len(t, r.Hits, web.HitsPerQuery)
		}
		require.EqualValues(t, tt.want, read)
		require.Equal(t, tt.want, b.pages.Load())
	}
	require.Equal(t, int64(0), b.pages.Load())
}

func TestResearchRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, articlePage)
	tests := []struct {
		queries  []string
		maxPages *int
		want     string
	}{
		{nil, nil, "queries: give 1 to 3 queries, not 0"},
		{[]string{"a", "b", "c", "d"}, nil, "queries: give 1 to 3 queries, not 4"},
		{[]string{"tides", " Tides "}, nil, "queries[1] repeats an earlier query"},
		{[]string{"  "}, nil, "queries[0] is empty"},
		{[]string{strings.Repeat("x", 401)}, nil, "longer than 400 characters"},
		{[]string{"a"}, ptr(4), "maxPages must be between 0 and 3, not 4"},
	}
	for _, tt := range tests {
		_, err := b.svc.Research(context.Background(), tt.queries, tt.maxPages)
		var refusal *tools.Refusal
		require.ErrorAs(t, err, &refusal)
		require.ErrorContains(t, err, tt.want)
	}
	var none *web.Service
	_, err := none.Research(context.Background(), []string{"a"}, nil)
	require.ErrorIs(t, err, web.ErrNotEnabled)
	_, err = none.ReadPage(context.Background(), "https://example.org/", nil, nil)
	require.ErrorIs(t, err, web.ErrNotEnabled)
}

// TestReadPage: windows of a long page; a cut read carries the offset, and
// reading on from it continues exactly; the limits are refused.
func TestReadPage(t *testing.T) {
	t.Parallel()
	var body strings.Builder
	body.WriteString("<html><head><title>Long</title></head><body><article><h1>Long read</h1>")
	for i := range 60 {
		fmt.Fprintf(&body, "<p>Paragraph %d says something about the sea, the moon and the tides, at some length.</p>", i)
	}
	body.WriteString("</article></body></html>")
	b := setup(t, nil, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body.String()) })
	ctx := context.Background()

	first, err := b.svc.ReadPage(ctx, b.site.URL+"/long", nil, nil)
	require.NoError(t, err)
	require.Equal(t, "Long", first.Title)
	require.True(t, first.Truncated)
	require.Equal(t, web.ReadDefaultChars, *first.NextOffset)
	require.Equal(t, web.ReadDefaultChars, len([]rune(first.Text)))
	require.True(t, strings.HasPrefix(first.Text, "## Long read\n\nParagraph 0 says"), first.Text[:80])

	var whole strings.Builder
	offset := 0
	for {
		p, err := b.svc.ReadPage(ctx, b.site.URL+"/long", ptr(offset), ptr(web.ReadMaxChars))
		require.NoError(t, err)
		require.Equal(t, offset, p.Offset)
		whole.WriteString(p.Text)
		if !p.Truncated {
			require.Nil(t, p.NextOffset)
			require.Equal(t, p.Chars, len([]rune(whole.String())))
			break
		}
		offset = *p.NextOffset
	}
	require.True(t, strings.HasPrefix(whole.String(), first.Text))
	require.Contains(t, whole.String(), "Paragraph 59 says")

	tests := []struct {
		url              string
		offset, maxChars *int
		want             string
	}{
		{b.site.URL, nil, ptr(web.ReadMaxChars + 1), "maxChars must be between 500 and 10000"},
		{b.site.URL, nil, ptr(100), "maxChars must be between 500 and 10000"},
		{b.site.URL, ptr(-1), nil, "offset must not be negative"},
		{"http://169.254.169.254/latest/meta-data/", nil, nil, "refused by rule no private addresses"},
		{"javascript:alert(1)", nil, nil, "refused by rule http and https only"},
		{"http://" + strings.Repeat("a", web.MaxURLChars) + ".example/", nil, nil, "longer than 2048 characters"},
	}
	for _, tt := range tests {
		_, err := b.svc.ReadPage(ctx, tt.url, tt.offset, tt.maxChars)
		var refusal *tools.Refusal
		require.ErrorAs(t, err, &refusal, tt.url)
		require.ErrorContains(t, err, tt.want, tt.url)
	}
	require.Less(t, web.ReadDefaultChars, 4_000, "the lowest default of the set")
	require.Less(t, web.ReadMaxChars, 20_000, "the lowest maximum of the set")
}

func urls(pages []web.Page) []string {
	var out []string
	for _, p := range pages {
		out = append(out, p.URL)
	}
	return out
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// BenchmarkResearch is the wall time of a research_web call whose three
// pages each take 200 ms to answer: read concurrently, it should stay
// under 1.3 × 200 ms plus the search.
func BenchmarkResearch(b *testing.B) {
	bundle := setup(b, map[string][]string{"a": {"/1", "/2", "/3"}}, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		articlePage(w, r)
	})
	ctx := context.Background()
	for b.Loop() {
		got, err := bundle.svc.Research(ctx, []string{"a"}, ptr(3))
		if err != nil || len(got.Results[0].Pages) != 3 {
			b.Fatalf("research: %v %+v", err, got)
		}
	}
}
