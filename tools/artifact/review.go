package artifact

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"

	"github.com/toolgate/toolgate/ent"
	entartifact "github.com/toolgate/toolgate/ent/artifact"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/artifact/browser"
	"github.com/toolgate/toolgate/tools/workspace"
)

// The review tools' limits.
const (
	// MaxInspectPages is the most page images one inspect_artifact call
	// returns.
	MaxInspectPages = 10
	// MaxSelectors is the most CSS selectors one measure_layout call
	// measures.
	MaxSelectors = 10
	// MaxSelectorChars bounds one selector.
	MaxSelectorChars = 300
	// MaxElements is the most elements measure_layout describes per
	// selector; the rest are counted.
	MaxElements = 20
	// MaxOverflowListed is the most overflowing elements an inspection
	// names; the rest are counted.
	MaxOverflowListed = 10
)

// PDFMediaType is the media type print_pdf's files are kept with.
const PDFMediaType = "application/pdf"

// ErrNoBrowser refuses a review tool on a server without a browser: it is
// not offered there, so only a hand-made call meets it.
var ErrNoBrowser = tools.Refusef("no headless browser on this server: the review tools are not available (%v)", browser.ErrNoBrowser)

// Image is one page image, base64 in Data.
type Image struct {
	Page     int    `json:"page"`
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// Inspection is what inspect_artifact answers: the page images, and the
// words the model reads beside them.
type Inspection struct {
	ArtifactID int    `json:"artifactId"`
	Title      string `json:"title"`
	Version    int    `json:"version"`
	// Pages is every page the version renders to; Shown the pages imaged.
	Pages int   `json:"pages"`
	Shown []int `json:"shown"`
	// Overflowing counts the elements that do not fit their box or reach
	// past their page; Overflow names the first few.
	Overflowing int               `json:"overflowing"`
	Overflow    []browser.Element `json:"overflow"`
	Summary     string            `json:"summary"`
	Images      []Image           `json:"images"`
}

// page renders version v of a for the browser: a visual kind only.
func page(a *ent.Artifact, v *ent.ArtifactVersion) (string, error) {
	switch a.Kind {
	case entartifact.KindHTML:
		return v.Content, nil
	case entartifact.KindSvg:
		return `<!doctype html><style>html,body{margin:0}</style>` + v.Content, nil
	}
	return "", tools.Refusef("artifact %q is %s: only html and svg artifacts are rendered", a.Title, a.Kind)
}

// latest loads an artifact and its latest version, rendered for the
// browser.
func (s *Store) latest(ctx context.Context, id int) (*ent.Artifact, *ent.ArtifactVersion, string, error) {
	a, err := s.Get(ctx, id)
	if err != nil {
		return nil, nil, "", err
	}
	v, err := s.Version(ctx, a, 0)
	if err != nil {
		return nil, nil, "", err
	}
	html, err := page(a, v)
	return a, v, html, err
}

// Inspect renders the latest version of an artifact and returns images
// of the pages asked for (none: the first MaxInspectPages), with the
// page count and the elements that overflow; the version is then
// inspected, and shown to the person.
func (s *Store) Inspect(ctx context.Context, pool *browser.Pool, id int, pages []int) (*Inspection, error) {
	if pool == nil {
		return nil, ErrNoBrowser
	}
	if len(pages) > MaxInspectPages {
		return nil, tools.Refusef("pages: at most %d pages per inspection, not %d; inspect the rest in another call", MaxInspectPages, len(pages))
	}
	for i, p := range pages {
		if p < 1 {
			return nil, tools.Refusef("pages[%d] is %d: pages count from 1", i, p)
		}
		if slices.Contains(pages[:i], p) {
			return nil, tools.Refusef("pages[%d] repeats page %d", i, p)
		}
	}
	a, v, html, err := s.latest(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &Inspection{ArtifactID: a.ID, Title: a.Title, Version: v.Number}
	var shots [][]byte
	err = pool.Page(ctx, html, func(ctx context.Context) error {
		rects, n, err := browser.Pages(ctx, 1<<20)
		if err != nil {
			return err
		}
		out.Pages = n
		if len(pages) == 0 {
			for p := 1; p <= min(n, MaxInspectPages); p++ {
				pages = append(pages, p)
			}
		}
		picked := make([]browser.Rect, len(pages))
		for i, p := range pages {
			if p > n {
				return tools.Refusef("pages[%d] is %d: version %d has %d pages", i, p, v.Number, n)
			}
			picked[i] = rects[p-1]
		}
		out.Shown = pages
		if out.Overflow, out.Overflowing, err = browser.Overflowing(ctx, MaxOverflowListed); err != nil {
			return err
		}
		shots, err = browser.Capture(ctx, picked)
		return err
	})
	if err != nil {
		return nil, renderError(err)
	}
	out.Images = make([]Image, len(shots))
	for i, b := range shots {
		out.Images[i] = Image{Page: pages[i], MimeType: "image/jpeg", Data: base64.StdEncoding.EncodeToString(b)}
	}
	if Visual(a.Kind) {
		if err := s.MarkInspected(ctx, v); err != nil {
			return nil, err
		}
	}
	out.Summary = summary(a, out)
	return out, nil
}

// renderError keeps a refusal a refusal; anything else the browser did
// is a failure of the run the model hears as such.
func renderError(err error) error {
	var refusal *tools.Refusal
	if errors.As(err, &refusal) {
		return err
	}
	return tools.Failf("the browser could not render the artifact: %v", err)
}

// summary is the inspection in a few words: what was rendered, what
// overflows, and that the version is now the one shown.
func summary(a *ent.Artifact, in *Inspection) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q version %d renders to %d page%s; images of %s follow.", a.Title, in.Version, in.Pages, plural(in.Pages), pageList(in.Shown))
	if rest := in.Pages - len(in.Shown); rest > 0 {
		fmt.Fprintf(&b, " %d page%s not shown: inspect them with pages.", rest, plural(rest))
	}
	if in.Overflowing == 0 {
		b.WriteString(" Nothing overflows.")
	} else {
		fmt.Fprintf(&b, " %d element%s overflow:", in.Overflowing, plural(in.Overflowing))
		for i, e := range in.Overflow {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " page %d %s", e.Page, e.Element)
			if e.OverflowX > 0 {
				fmt.Fprintf(&b, " %.0fpx too wide", e.OverflowX)
			}
			if e.OverflowY > 0 {
				fmt.Fprintf(&b, " %.0fpx too tall", e.OverflowY)
			}
			if e.Outside {
				b.WriteString(" past the page edge")
			}
		}
		if more := in.Overflowing - len(in.Overflow); more > 0 {
			fmt.Fprintf(&b, "; %d more", more)
		}
		b.WriteString(". Fix them (measure_layout gives boxes) and inspect again.")
	}
	if Visual(a.Kind) {
		fmt.Fprintf(&b, " Version %d is inspected: the person sees it.", in.Version)
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// pageList names pages compactly: "pages 1-3, 7".
func pageList(ps []int) string {
	if len(ps) == 1 {
		return "page " + strconv.Itoa(ps[0])
	}
	var parts []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		} else {
			parts = append(parts, strconv.Itoa(ps[i]))
		}
		i = j + 1
	}
	return "pages " + strings.Join(parts, ", ")
}

// SelectorLayout is what one selector of measure_layout matched.
type SelectorLayout struct {
	Selector string `json:"selector"`
	// Count is every element matched; Elements describes at most
	// MaxElements of them.
	Count    int               `json:"count"`
	Elements []browser.Element `json:"elements"`
}

// Layout is what measure_layout answers.
type Layout struct {
	ArtifactID int              `json:"artifactId"`
	Version    int              `json:"version"`
	Pages      int              `json:"pages"`
	Selectors  []SelectorLayout `json:"selectors"`
	// Failures are the selectors that matched nothing (ABSENCE) or that
	// the browser could not parse (REFUSED).
	Failures []schematype.ItemFailure `json:"failures"`
}

// Measure renders the latest version of an artifact and measures the
// elements each selector matches: boxes, content that does not fit, and
// elements that reach past their page.
func (s *Store) Measure(ctx context.Context, pool *browser.Pool, id int, selectors []string) (*Layout, error) {
	if pool == nil {
		return nil, ErrNoBrowser
	}
	if len(selectors) == 0 || len(selectors) > MaxSelectors {
		return nil, tools.Refusef("selectors: give 1 to %d CSS selectors, not %d", MaxSelectors, len(selectors))
	}
	for i, sel := range selectors {
		switch {
		case strings.TrimSpace(sel) == "":
			return nil, tools.Refusef("selectors[%d] is empty", i)
		case utf8.RuneCountInString(sel) > MaxSelectorChars:
			return nil, tools.Refusef("selectors[%d] is longer than %d characters", i, MaxSelectorChars)
		}
	}
	a, v, html, err := s.latest(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &Layout{ArtifactID: a.ID, Version: v.Number, Selectors: []SelectorLayout{}, Failures: []schematype.ItemFailure{}}
	var matched []browser.Matched
	err = pool.Page(ctx, html, func(ctx context.Context) error {
		_, n, err := browser.Pages(ctx, 0)
		if err != nil {
			return err
		}
		out.Pages = n
		matched, err = browser.Measure(ctx, selectors, MaxElements)
		return err
	})
	if err != nil {
		return nil, renderError(err)
	}
	if len(matched) != len(selectors) {
		return nil, tools.Failf("the browser measured %d of %d selectors", len(matched), len(selectors))
	}
	for i, m := range matched {
		switch {
		case m.Invalid != "":
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: selectors[i], Kind: schematype.FailureRefused,
				Message: "not a CSS selector the browser can read: " + m.Invalid})
		case m.Count == 0:
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: selectors[i], Kind: schematype.FailureAbsence,
				Message: "no element matches"})
		default:
			out.Selectors = append(out.Selectors, SelectorLayout{Selector: selectors[i], Count: m.Count, Elements: m.Elements})
		}
	}
	return out, nil
}

// Printed is what print_pdf answers.
type Printed struct {
	ArtifactID int    `json:"artifactId"`
	Version    int    `json:"version"`
	Path       string `json:"path"`
	Pages      int    `json:"pages"`
	Bytes      int    `json:"bytes"`
	Created    bool   `json:"created"`
	// ConversationID is the conversation whose workspace holds the PDF:
	// the API names its download with it. Not part of the tool's answer.
	ConversationID int `json:"-"`
}

// PrintPDF prints the latest version of an artifact to a PDF in the
// workspace at path (which must end in .pdf): a deck one slide per page.
// A draft is refused before the browser renders it: visual files need
// inspection before saving. ws is the conversation's workspace, written
// only once the PDF is made.
func (s *Store) PrintPDF(ctx context.Context, pool *browser.Pool, ws *workspace.Workspace, id int, path string) (*Printed, error) {
	if pool == nil {
		return nil, ErrNoBrowser
	}
	p, err := workspace.CleanPath(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(strings.ToLower(p), ".pdf") {
		return nil, tools.Refusef("path %q: give a path ending in .pdf", path)
	}
	a, v, html, err := s.latest(ctx, id)
	if err != nil {
		return nil, err
	}
	if Draft(a.Kind, v) {
		return nil, DraftSaveRefusal(a.Title, v.Number)
	}
	var doc []byte
	err = pool.Page(ctx, html, func(ctx context.Context) error {
		doc, err = browser.PrintPDF(ctx)
		return err
	})
	if err != nil {
		return nil, renderError(err)
	}
	r, err := pdf.NewReader(bytes.NewReader(doc), int64(len(doc)))
	if err != nil {
		return nil, tools.Failf("the browser printed no readable PDF: %v", err)
	}
	w, err := ws.PutBinary(ctx, p, PDFMediaType, doc)
	if err != nil {
		return nil, err
	}
	return &Printed{ArtifactID: a.ID, Version: v.Number, Path: w.Path, Pages: r.NumPage(), Bytes: w.Bytes, Created: w.Created,
		ConversationID: s.conv}, nil
}
