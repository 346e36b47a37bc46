// Package web is the Public web tool family: research_web (search through
// the approved provider, then read the best pages) and read_page (one page,
// in windows). Both read pages only through Fetcher, which refuses private
// addresses after DNS and on every redirect hop.
//
// "Approved" means two things at once: the server is configured with a
// provider (TOOLGATE_WEB_PROVIDER), and the organisation's admin enabled
// it (updateOrganization(input: {webResearch: true})).
package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/result"
)

// Kind is what became of one failed item: the tool rules' one vocabulary.
type Kind = schematype.FailureKind

// The kinds, as this family uses them.
const (
	// KindAbsence: it ran and found nothing (no hits; page 404 or 410).
	KindAbsence = schematype.FailureAbsence
	// KindOutage: it never ran (provider or site unreachable, 5xx, 429, timed out).
	KindOutage = schematype.FailureOutage
	// KindError: it ran and failed, or a safety rule refused it.
	KindError = schematype.FailureError
)

// The limits of the family.
const (
	// MaxQueries is the most queries one research_web call runs.
	MaxQueries = 3
	// MaxPages is the most pages one research_web call reads, in all.
	MaxPages = 3
	// DefaultPages is how many pages research_web reads when not told.
	DefaultPages = 2
	// HitsPerQuery is how many hits each query returns.
	HitsPerQuery = 5
	// PageChars is the budget of each page research_web reads.
	PageChars = 3_000
	// ReadDefaultChars and ReadMaxChars are read_page's window: the lowest
	// default and maximum of the tool set (read_tool_result: 4,000 and
	// 20,000; read_document: 40,000).
	ReadDefaultChars = 3_000
	ReadMaxChars     = 10_000
	// ReadMinChars is the smallest window read_page gives.
	ReadMinChars = 500
	// MaxQueryChars bounds one query.
	MaxQueryChars = 400
	// MaxURLChars bounds one page address, asked for or redirected to.
	MaxURLChars = 2_048
	// MaxTitleChars bounds a page's title.
	MaxTitleChars = 300
)

// Config is the server's web configuration, from the environment.
type Config struct {
	// Provider, URL, Key: TOOLGATE_WEB_PROVIDER, _URL, _KEY. An empty
	// Provider configures nothing: the family is never offered.
	Provider, URL, Key string
	// AllowPrivate: TOOLGATE_WEB_ALLOW_PRIVATE, for tests only.
	AllowPrivate string
	// Resolve replaces DNS for page reads (tests).
	Resolve Resolver
	// PageTimeout bounds one page read; zero: DefaultPageTimeout.
	PageTimeout time.Duration
	// Client sends the provider's requests; nil: a default one.
	Client *http.Client
	// Retry repeats a search or a page read that failed in a way worth
	// repeating (a *tools.Transient); the server wires its retry loop in.
	// nil sends each once.
	Retry tools.Retry
}

// Service runs the family's tools. A nil *Service is a server with no
// provider: nothing is offered and every call is refused.
type Service struct {
	provider Provider
	fetcher  *Fetcher
	retry    tools.Retry
}

// New returns the service cfg describes, or nil (and no error) when no
// provider is configured.
func New(cfg Config) (*Service, error) {
	if strings.TrimSpace(cfg.Provider) == "" {
		return nil, nil
	}
	p, err := NewProvider(cfg.Provider, cfg.URL, cfg.Key, cfg.Client)
	if err != nil {
		return nil, err
	}
	allow, err := ParseAllow(cfg.AllowPrivate)
	if err != nil {
		return nil, fmt.Errorf("configure web: TOOLGATE_WEB_ALLOW_PRIVATE: %w", err)
	}
	s := NewService(p, NewFetcher(FetcherConfig{Allow: allow, Resolve: cfg.Resolve, Timeout: cfg.PageTimeout}))
	s.retry = cfg.Retry
	return s, nil
}

// NewService returns a service over a provider and a fetcher that sends
// each request once.
func NewService(p Provider, f *Fetcher) *Service { return &Service{provider: p, fetcher: f} }

// ProviderName names the configured provider; "" for none.
func (s *Service) ProviderName() string {
	if s == nil {
		return ""
	}
	return s.provider.Name()
}

// Enabled reports whether org's turns may be offered the family: a
// provider is configured and the organisation's admin turned it on.
func (s *Service) Enabled(org *ent.Organization) bool {
	return s != nil && org != nil && org.WebResearch
}

// ErrNotEnabled is the refusal of a call where the family is not enabled.
var ErrNotEnabled = tools.Refusef("web research is not enabled for this organisation (an admin enables it with updateOrganization, on a server with a web provider)")

// Research is what research_web returns.
type Research struct {
	// Results, one per query, in the order asked.
	Results []QueryResult `json:"results"`
	// Failures lists queries that found nothing or never ran, and pages
	// that could not be read: item is the query's position.
	Failures []schematype.ItemFailure `json:"failures"`
}

// QueryResult is one query's hits and the pages read from them.
type QueryResult struct {
	Query string `json:"query"`
	Hits  []Hit  `json:"hits"`
	Pages []Page `json:"pages"`
}

// Page is the readable text of one page, cut to a budget.
type Page struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	Text  string `json:"text"`
	// Chars is the length of the page's whole text.
	Chars int `json:"chars"`
	// Truncated: Text stops at the budget; read_page from NextOffset goes on.
	Truncated  bool `json:"truncated"`
	NextOffset *int `json:"nextOffset"`
}

// CheckResearch refuses queries and maxPages outside the limits, naming them.
func CheckResearch(queries []string, maxPages *int) error {
	if len(queries) == 0 || len(queries) > MaxQueries {
		return tools.Refusef("queries: give 1 to %d queries, not %d", MaxQueries, len(queries))
	}
	seen := map[string]bool{}
	for i, q := range queries {
		k := tools.QueryKey(q)
		switch {
		case k == "":
			return tools.Refusef("queries[%d] is empty", i)
		case utf8.RuneCountInString(q) > MaxQueryChars:
			return tools.Refusef("queries[%d] is longer than %d characters", i, MaxQueryChars)
		case seen[k]:
			return tools.Refusef("queries[%d] repeats an earlier query: give distinct angles", i)
		}
		seen[k] = true
	}
	if maxPages != nil && (*maxPages < 0 || *maxPages > MaxPages) {
		return tools.Refusef("maxPages must be between 0 and %d, not %d", MaxPages, *maxPages)
	}
	return nil
}

// Research runs the queries concurrently, then reads the best pages
// concurrently: at most maxPages (default DefaultPages) in all, taking
// each query's best hit in turn. A query or page that fails is a failure
// of its item, once the retries worth making are made; the others stand.
func (s *Service) Research(ctx context.Context, queries []string, maxPages *int) (*Research, error) {
	if s == nil {
		return nil, ErrNotEnabled
	}
	if err := CheckResearch(queries, maxPages); err != nil {
		return nil, err
	}
	pages := DefaultPages
	if maxPages != nil {
		pages = *maxPages
	}
	out := &Research{Results: make([]QueryResult, len(queries)), Failures: []schematype.ItemFailure{}}
	errs := make([]error, len(queries))
	var wg sync.WaitGroup
	for i, q := range queries {
		out.Results[i] = QueryResult{Query: q, Hits: []Hit{}, Pages: []Page{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var hits []Hit
			errs[i] = tools.Try(ctx, s.retry, func(ctx context.Context) error {
				var err error
				hits, err = s.provider.Search(ctx, strings.TrimSpace(q), HitsPerQuery)
				return err
			})
			if errs[i] == nil {
				out.Results[i].Hits = append(out.Results[i].Hits, hits...)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case err != nil:
			kind := KindOutage
			var malformed *MalformedError
			if errors.As(err, &malformed) {
				kind = KindError
			}
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: queries[i], Kind: kind, Message: "search did not run: " + err.Error()})
		case len(out.Results[i].Hits) == 0:
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: queries[i], Kind: KindAbsence, Message: "the search ran and found nothing"})
		}
	}

	type pick struct {
		query int
		url   string
	}
	var picks []pick
	seen := map[string]bool{}
	for rank := 0; rank < HitsPerQuery && len(picks) < pages; rank++ {
		for qi := range out.Results {
			hits := out.Results[qi].Hits
			if rank >= len(hits) || len(picks) >= pages || seen[hits[rank].URL] {
				continue
			}
			seen[hits[rank].URL] = true
			picks = append(picks, pick{qi, hits[rank].URL})
		}
	}
	read := make([]Page, len(picks))
	failed := make([]*PageError, len(picks))
	for i, p := range picks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read[i], failed[i] = s.readPage(ctx, p.url, PageChars)
		}()
	}
	wg.Wait()
	for i, p := range picks {
		if failed[i] != nil {
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: p.query, Input: p.url, Kind: failed[i].Kind, Message: failed[i].Msg})
			continue
		}
		out.Results[p.query].Pages = append(out.Results[p.query].Pages, read[i])
	}
	return out, nil
}

// readPage fetches and extracts one page and cuts it to budget.
func (s *Service) readPage(ctx context.Context, raw string, budget int) (Page, *PageError) {
	title, text, final, perr := s.fetchText(ctx, raw)
	if perr != nil {
		return Page{}, perr
	}
	w := result.Window(text, 0, budget)
	p := Page{URL: final, Title: title, Text: w.Text, Chars: w.Total}
	if w.NextOffset >= 0 {
		p.Truncated, p.NextOffset = true, &w.NextOffset
	}
	return p, nil
}

// fetchText reads a page's title and main text, retrying a read that
// failed in a way worth repeating. The title is cut to MaxTitleChars.
func (s *Service) fetchText(ctx context.Context, raw string) (title, text, final string, perr *PageError) {
	if utf8.RuneCountInString(raw) > MaxURLChars {
		return "", "", "", &PageError{Kind: KindError, Msg: fmt.Sprintf("the address is longer than %d characters", MaxURLChars)}
	}
	u, err := ParseURL(raw)
	if err != nil {
		return "", "", "", classify(quoted(raw), err)
	}
	var doc *Document
	err = tools.Try(ctx, s.retry, func(ctx context.Context) error {
		var err error
		doc, err = s.fetcher.Fetch(ctx, u)
		return err
	})
	if err != nil {
		return "", "", "", classify(u, err)
	}
	title, text, err = Extract(doc)
	if err != nil {
		return "", "", "", classify(doc.URL, err)
	}
	return cut(title, MaxTitleChars), text, doc.URL.String(), nil
}

// PageRead is one window of a page, what read_page returns.
type PageRead struct {
	// URL is where the page was read, after redirects.
	URL   string `json:"url"`
	Title string `json:"title"`
	Text  string `json:"text"`
	// Offset is where Text starts; Chars the length of the whole text.
	Offset int `json:"offset"`
	Chars  int `json:"chars"`
	// Truncated: the window stops before the end; NextOffset continues.
	Truncated  bool `json:"truncated"`
	NextOffset *int `json:"nextOffset"`
}

// CheckRead refuses a window outside read_page's limits.
func CheckRead(offset, maxChars *int) error {
	if offset != nil && *offset < 0 {
		return tools.Refusef("offset must not be negative")
	}
	if maxChars != nil && (*maxChars < ReadMinChars || *maxChars > ReadMaxChars) {
		return tools.Refusef("maxChars must be between %d and %d, not %d", ReadMinChars, ReadMaxChars, *maxChars)
	}
	return nil
}

// ReadPage reads one window of the page at raw: maxChars (default
// ReadDefaultChars, at most ReadMaxChars) characters from offset. A page
// that cannot be read says what went wrong in the tool rules' terms: a
// *tools.Outage when its site could not be reached after the retries, a
// *tools.Absence when it is not there, a *tools.Refusal when a rule
// refused it, and a *tools.Failure when the site refused it or it is no
// page we read.
func (s *Service) ReadPage(ctx context.Context, raw string, offset, maxChars *int) (*PageRead, error) {
	if s == nil {
		return nil, ErrNotEnabled
	}
	if err := CheckRead(offset, maxChars); err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(raw) > MaxURLChars {
		return nil, tools.Refusef("the address is longer than %d characters", MaxURLChars)
	}
	title, text, final, perr := s.fetchText(ctx, raw)
	switch {
	case perr == nil:
	case perr.Kind == KindOutage:
		return nil, tools.Outagef("%s", perr.Msg)
	case perr.Kind == KindAbsence:
		return nil, tools.Absentf("%s", perr.Msg)
	case perr.refused():
		return nil, tools.Refusef("%s", perr.Msg)
	default:
		return nil, tools.Failf("%s", perr.Msg)
	}
	n := ReadDefaultChars
	if maxChars != nil {
		n = *maxChars
	}
	from := 0
	if offset != nil {
		from = *offset
	}
	w := result.Window(text, from, n)
	p := &PageRead{URL: final, Title: title, Text: w.Text, Offset: w.Offset, Chars: w.Total}
	if w.NextOffset >= 0 {
		p.Truncated, p.NextOffset = true, &w.NextOffset
	}
	return p, nil
}

// quoted labels an address that did not parse.
type quoted string

func (q quoted) String() string { return fmt.Sprintf("%q", string(q)) }

func utf8Count(s string) int { return utf8.RuneCountInString(s) }
