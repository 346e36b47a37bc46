package web

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxElements bounds the work readability does on one hostile page.
const maxElements = 60_000

// Extract returns the title and the readable main text of a page, as
// Markdown-ish plain text: headings with #, list items with -, links as
// [text](url), code in fences. Plain-text pages come back as they are.
func Extract(doc *Document) (title, text string, err error) {
	if doc.ContentType == "text/plain" {
		if !utf8.Valid(doc.Body) {
			return "", "", &contentError{"not a text page (invalid UTF-8)"}
		}
		return "", tidy(string(doc.Body)), nil
	}
	p := readability.NewParser()
	p.MaxElemsToParse = maxElements
	article, err := p.Parse(bytes.NewReader(doc.Body), doc.URL)
	if err != nil {
		return "", "", &contentError{fmt.Sprintf("no readable text (%v)", err)}
	}
	if article.Node == nil {
		return article.Title(), "", &contentError{"no readable text on the page"}
	}
	var w markdown
	w.base = doc.URL
	w.node(article.Node)
	text = tidy(w.b.String())
	if text == "" {
		return article.Title(), "", &contentError{"no readable text on the page"}
	}
	return strings.TrimSpace(article.Title()), text, nil
}

// markdown writes a cleaned article tree as Markdown-ish text.
type markdown struct {
	b    strings.Builder
	base *url.URL
	// pre: inside a <pre>, whitespace is kept.
	pre int
	// list depth and, per level, the next number of an <ol> (0 for <ul>).
	lists []int
}

func (w *markdown) block() { w.b.WriteString("\n\n") }

func (w *markdown) node(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return
	case html.ElementNode:
	case html.DocumentNode:
		w.children(n)
		return
	default:
		return
	}
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg, atom.Iframe, atom.Form, atom.Button, atom.Img, atom.Picture, atom.Video, atom.Audio:
		return
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		w.block()
		w.b.WriteString(strings.Repeat("#", int(n.Data[1]-'0')) + " ")
		w.children(n)
		w.block()
	case atom.P, atom.Div, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Main, atom.Figure, atom.Figcaption, atom.Table, atom.Dl, atom.Hr:
		w.block()
		w.children(n)
		w.block()
	case atom.Blockquote:
		w.block()
		w.b.WriteString("> ")
		w.children(n)
		w.block()
	case atom.Br:
		w.b.WriteString("\n")
	case atom.Tr, atom.Dt, atom.Dd:
		w.b.WriteString("\n")
		w.children(n)
	case atom.Td, atom.Th:
		w.b.WriteString(" | ")
		w.children(n)
	case atom.Ul, atom.Ol:
		start := 0
		if n.DataAtom == atom.Ol {
			start = 1
		}
		w.lists = append(w.lists, start)
		w.b.WriteString("\n")
		w.children(n)
		w.lists = w.lists[:len(w.lists)-1]
		w.b.WriteString("\n")
	case atom.Li:
		w.b.WriteString("\n")
		depth := max(len(w.lists), 1)
		w.b.WriteString(strings.Repeat("  ", depth-1))
		if depth := len(w.lists); depth > 0 && w.lists[depth-1] > 0 {
			fmt.Fprintf(&w.b, "%d. ", w.lists[depth-1])
			w.lists[depth-1]++
		} else {
			w.b.WriteString("- ")
		}
		w.children(n)
	case atom.Pre:
		w.block()
		w.b.WriteString("```\n")
		w.pre++
		w.children(n)
		w.pre--
		w.b.WriteString("\n```")
		w.block()
	case atom.Code:
		if w.pre > 0 {
			w.children(n)
			return
		}
		w.b.WriteString("`")
		w.children(n)
		w.b.WriteString("`")
	case atom.A:
		href := w.href(n)
		if href == "" {
			w.children(n)
			return
		}
		var inner markdown
		inner.base, inner.pre, inner.lists = w.base, w.pre, w.lists
		inner.children(n)
		label := strings.TrimSpace(inner.b.String())
		switch label {
		case "":
		case href:
			w.b.WriteString(label)
		default:
			w.b.WriteString("[" + label + "](" + href + ")")
		}
	default:
		w.children(n)
	}
}

func (w *markdown) children(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.node(c)
	}
}

// href returns an absolute http(s) link target, or "" for anything else
// (fragments, javascript:, mailto:).
func (w *markdown) href(n *html.Node) string {
	for _, a := range n.Attr {
		if a.Key != "href" {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(a.Val))
		if err != nil {
			return ""
		}
		if w.base != nil {
			u = w.base.ResolveReference(u)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return ""
		}
		if w.base != nil && u.Host == w.base.Host && u.Path == w.base.Path && u.Fragment != "" {
			return ""
		}
		return u.String()
	}
	return ""
}

// text writes a text node, collapsing whitespace outside <pre>.
func (w *markdown) text(s string) {
	if w.pre > 0 {
		w.b.WriteString(s)
		return
	}
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			w.space()
			space = false
		}
		w.b.WriteRune(r)
	}
	if space {
		w.space()
	}
}

// space writes one space unless the text already ends in whitespace.
func (w *markdown) space() {
	s := w.b.String()
	if s == "" {
		return
	}
	if last, _ := utf8.DecodeLastRuneInString(s); !unicode.IsSpace(last) {
		w.b.WriteByte(' ')
	}
}

// tidy trims each line's trailing spaces, collapses blank runs to one blank
// line (outside code fences), and trims the whole.
func tidy(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s))
	blank, inFence := false, false
	for _, l := range strings.Split(s, "\n") {
		fence := strings.HasPrefix(l, "```")
		if !inFence {
			l = strings.TrimRightFunc(l, unicode.IsSpace)
			if l == "" {
				blank = true
				continue
			}
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
			if blank && !inFence {
				b.WriteByte('\n')
			}
		}
		blank = false
		b.WriteString(l)
		if fence {
			inFence = !inFence
		}
	}
	return strings.TrimSpace(b.String())
}
