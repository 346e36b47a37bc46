package document

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/ledongthuc/pdf"
)

// The PDF reader (github.com/ledongthuc/pdf) follows the references a file
// makes without remembering where it has been, and never looks at a
// context: a 600-byte file whose trailer's /Prev points at its own
// cross-reference table, or whose page is its own /Parent, keeps it busy
// for ever. These checks walk the same chains first, bounded, and refuse a
// file whose chain loops; the box (see Box) bounds whatever they miss.
const (
	// maxPageTreeDepth bounds how deep a PDF's page tree is walked, and how
	// far a page's /Parent chain is climbed: real trees are a few levels;
	// a hostile one (or a cycle) stops here.
	maxPageTreeDepth = 32
	// maxPageTreeNodes bounds the nodes of the page tree visited: a tree
	// whose inner nodes share their kids is walked once per path, and a
	// few dozen levels of that would be billions of visits.
	maxPageTreeNodes = 4 * MaxPDFPages
	// maxXrefSections bounds a file's chain of cross-reference sections
	// (one per incremental update).
	maxXrefSections = 1000
)

// prevEntry is a cross-reference section's /Prev entry.
var prevEntry = regexp.MustCompile(`/Prev[\x00\t\n\f\r ]+(\d+)`)

// checkXrefChain follows the cross-reference sections from startxref along
// their /Prev entries, as the reader will, and refuses a chain that comes
// back to a section it has passed. What it cannot make out it leaves to the
// reader, which names the fault itself.
func checkXrefChain(data []byte) error {
	tail := data[max(0, len(data)-1024):]
	i := bytes.LastIndex(tail, []byte("startxref"))
	if i < 0 {
		return nil
	}
	off, ok := leadingInt(tail[i+len("startxref"):])
	if !ok {
		return nil
	}
	seen := map[int64]bool{}
	for {
		if off <= 0 || off >= int64(len(data)) {
			return nil
		}
		if seen[off] {
			return unreadable("unreadable PDF: its cross-reference sections loop (a /Prev entry points back at a section already read)")
		}
		if seen[off] = true; len(seen) > maxXrefSections {
			return unreadable("unreadable PDF: more than %d cross-reference sections", maxXrefSections)
		}
		section := bytes.TrimLeft(data[off:], "\x00\t\n\f\r ")
		var dict []byte
		if bytes.HasPrefix(section, []byte("xref")) {
			// A table: its trailer dictionary follows it.
			t := bytes.Index(section, []byte("trailer"))
			if t < 0 {
				return nil
			}
			dict = section[t:]
		} else {
			// A stream: its dictionary precedes its data.
			dict = section
		}
		if end := bytes.Index(dict, []byte("stream")); end >= 0 {
			dict = dict[:end]
		}
		if end := bytes.Index(dict, []byte("startxref")); end >= 0 {
			dict = dict[:end]
		}
		m := prevEntry.FindSubmatch(dict)
		if m == nil {
			return nil
		}
		if off, ok = leadingInt(m[1]); !ok {
			return nil
		}
	}
}

// leadingInt reads the decimal integer b starts with, after white space.
func leadingInt(b []byte) (int64, bool) {
	b = bytes.TrimLeft(b, "\x00\t\n\f\r ")
	n := 0
	for n < len(b) && n < 19 && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	v, err := strconv.ParseInt(string(b[:n]), 10, 64)
	return v, err == nil
}

// pdfPages returns the pages of a page tree in order, walking it once: the
// reader's own Page(i) walks from the root each time, which costs a flat
// tree of n pages n² object reads. At most MaxPDFPages are taken. Each
// page's /Parent chain is climbed, bounded, as the reader climbs it for
// inherited resources without bound.
func pdfPages(ctx context.Context, root pdf.Value) ([]pdf.Page, error) {
	var out []pdf.Page
	nodes := 0
	var walk func(v pdf.Value, depth int) error
	walk = func(v pdf.Value, depth int) error {
		if depth > maxPageTreeDepth {
			return unreadable("unreadable PDF: its page tree is more than %d levels deep", maxPageTreeDepth)
		}
		if nodes++; nodes > maxPageTreeNodes {
			return unreadable("unreadable PDF: its page tree has more than %d nodes", maxPageTreeNodes)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if v.Key("Type").Name() != "Pages" {
			if v.Kind() == pdf.Dict {
				if len(out) == MaxPDFPages {
					return unreadable("the PDF has more than %d pages", MaxPDFPages)
				}
				if err := checkParents(v, len(out)+1); err != nil {
					return err
				}
				out = append(out, pdf.Page{V: v})
			}
			return nil
		}
		kids := v.Key("Kids")
		for i := 0; i < kids.Len(); i++ {
			if err := walk(kids.Index(i), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(root, 0)
}

// checkParents climbs page's /Parent chain as far as a page tree may be
// deep: a chain that goes on past it loops.
func checkParents(page pdf.Value, n int) error {
	v := page
	for range maxPageTreeDepth + 1 {
		if v = v.Key("Parent"); v.IsNull() {
			return nil
		}
	}
	return unreadable("unreadable PDF: page %d's /Parent chain loops (a page or page tree is its own ancestor)", n)
}

// aborted is the panic a read of the file raises once the context has
// ended, so a reader's loop that reads stops. It counts as a runtime error:
// the reader passes over the parse errors it recovers from, but lets
// runtime errors through.
type aborted struct{ err error }

func (a aborted) Error() string { return a.err.Error() }

// RuntimeError marks aborted as a runtime.Error.
func (aborted) RuntimeError() {}

// ctxReaderAt reads data until ctx ends.
type ctxReaderAt struct {
	ctx context.Context
	r   *bytes.Reader
}

func (c ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		panic(aborted{err})
	}
	return c.r.ReadAt(p, off)
}

func extractPDF(ctx context.Context, data []byte) (text string, err error) {
	// The reader panics on some malformed files: that file fails, the
	// server does not.
	defer func() {
		if p := recover(); p != nil {
			if ctx.Err() != nil {
				text, err = "", ctx.Err()
				return
			}
			text, err = "", unreadable("unreadable PDF: %v", p)
		}
	}()
	if err := checkXrefChain(data); err != nil {
		return "", err
	}
	r, err := pdf.NewReader(ctxReaderAt{ctx, bytes.NewReader(data)}, int64(len(data)))
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if errors.Is(err, pdf.ErrInvalidPassword) || strings.Contains(err.Error(), "encrypt") {
			return "", unreadable("the PDF is encrypted: upload a copy without a password")
		}
		return "", unreadable("unreadable PDF: %v", err)
	}
	n := r.NumPage()
	if n > MaxPDFPages {
		return "", unreadable("the PDF has %d pages; at most %d are read", n, MaxPDFPages)
	}
	pages, err := pdfPages(ctx, r.Trailer().Key("Root").Key("Pages"))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, p := range pages {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		// Each page's own fonts: a name like /F1 means another font on
		// another page.
		t, err := p.GetPlainText(nil)
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", unreadable("unreadable PDF page %d: %v", i+1, err)
		}
		b.WriteString(t)
		b.WriteString("\n\n")
		if b.Len() > 4*MaxTextChars {
			return "", unreadable("the file's text passes %d characters", MaxTextChars)
		}
	}
	return b.String(), nil
}
