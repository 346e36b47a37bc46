package preview

import (
	"bytes"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent/schematype"
)

// DefaultLimit is the product's preview ceiling, in encoded characters.
const DefaultLimit = 6000

// MinLimit is the smallest limit Build accepts: below it the result context
// leaves no useful room.
const MinLimit = 256

// Counts are the sizes of a whole stored result.
type Counts struct {
	// Chars is the number of Unicode characters (an invalid UTF-8 byte counts one).
	Chars int64
	// Bytes is the length in bytes.
	Bytes int64
	// Items is the number of elements of a top-level JSON array, keys of a
	// top-level JSON object (1 for a JSON scalar), or lines of text.
	Items int64
}

// Context is what Build needs to know besides the content.
type Context struct {
	// Ref is the stored result's ref, echoed in the preview.
	Ref string
	// Counts are the stored result's counts; when zero, Build measures them.
	Counts Counts
	// Limit is the most characters the model may receive; 0 means DefaultLimit.
	Limit int
	// TruncatedAtSource says the tool itself cut the result before storing it.
	TruncatedAtSource bool
}

// Span is a range of bytes [Start, End) of the original content.
type Span struct {
	Start, End int64
}

// Result is what the model receives in place of a stored result.
type Result struct {
	// Body is the text the model receives. When the result passes whole
	// unchanged it is the content itself, not a copy.
	Body []byte
	// Partial says Body is a preview that leaves part of the result out.
	Partial bool
	// Visible are the byte ranges of the content that Body shows, in order.
	Visible []Span
}

// Measure returns the counts of content stored as kind: text is counted in
// lines, JSON in top-level items, media only in bytes. Malformed JSON is
// counted as text, the way Build previews it.
func Measure(kind schematype.ResultKind, content []byte) Counts {
	c := Counts{Bytes: int64(len(content))}
	if kind == schematype.KindMedia {
		return c
	}
	c.Chars = int64(countChars(content))
	if kind == schematype.KindJSON {
		s := newScanner(content, 0, 1)
		if s.run() {
			c.Items = int64(s.items())
			return c
		}
	}
	c.Items = int64(countLines(content))
	return c
}

// Build returns what the model receives for content stored as kind: the
// whole content when it fits c.Limit, otherwise a preview as described in
// the package documentation.
func Build(kind schematype.ResultKind, content []byte, c Context) (Result, error) {
	limit := c.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < MinLimit {
		return Result{}, fmt.Errorf("build preview: limit %d is below %d", limit, MinLimit)
	}
	switch kind {
	case schematype.KindMedia:
		return whole(content), nil
	case schematype.KindText, schematype.KindJSON:
	default:
		return Result{}, fmt.Errorf("build preview: unknown kind %q", kind)
	}
	counts := c.Counts
	measure := counts == (Counts{})
	if measure {
		counts = Counts{Chars: int64(countChars(content)), Bytes: int64(len(content))}
	}
	if counts.Chars <= int64(limit) {
		return whole(content), nil
	}
	if kind == schematype.KindJSON {
		s := newScanner(content, limit, maxNodes)
		if s.run() {
			if measure {
				counts.Items = int64(s.items())
			}
			return buildJSON(content, s.nodes, c, counts, limit)
		}
	}
	if measure {
		counts.Items = int64(countLines(content))
	}
	return buildText(content, c, counts, limit)
}

func whole(content []byte) Result {
	r := Result{Body: content}
	if len(content) > 0 {
		r.Visible = []Span{{0, int64(len(content))}}
	}
	return r
}

// appendContext writes the "_toolResultContext" member.
func appendContext(dst []byte, c Context, counts Counts) []byte {
	dst = append(dst, `"_toolResultContext":{"ref":`...)
	dst = appendString(dst, []byte(c.Ref))
	dst = append(dst, `,"chars":`...)
	dst = strconv.AppendInt(dst, counts.Chars, 10)
	dst = append(dst, `,"bytes":`...)
	dst = strconv.AppendInt(dst, counts.Bytes, 10)
	dst = append(dst, `,"items":`...)
	dst = strconv.AppendInt(dst, counts.Items, 10)
	dst = append(dst, `,"partial":true`...)
	if c.TruncatedAtSource {
		dst = append(dst, `,"truncatedAtSource":true`...)
	}
	return append(dst, '}')
}

// checkLimit guards the arithmetic of the budgets: a preview over the limit
// is a bug, never something to hand to the model.
func checkLimit(body []byte, limit int) error {
	if n := utf8.RuneCount(body); n > limit {
		return fmt.Errorf("build preview: preview has %d characters, over the limit of %d", n, limit)
	}
	return nil
}

// countChars counts characters as utf8.RuneCount does, several times
// faster: results can be many megabytes. Valid UTF-8 (checked by
// utf8.Valid, which is fast) has one character per byte that is not a
// continuation byte, and those are counted eight at a time.
func countChars(b []byte) int {
	if !utf8.Valid(b) {
		return utf8.RuneCount(b)
	}
	n := len(b)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := le64(b[i:])
		n -= bits.OnesCount64(x &^ (x << 1) & msb)
	}
	for ; i < len(b); i++ {
		if b[i]&0xc0 == 0x80 {
			n--
		}
	}
	return n
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func countLines(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	n := bytes.Count(b, []byte{'\n'})
	if b[len(b)-1] != '\n' {
		n++
	}
	return n
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// mergeSpans merges neighbouring spans whose gap holds only JSON
// punctuation and whitespace: nothing in such a gap was hidden.
func mergeSpans(src []byte, spans []Span) []Span {
	if len(spans) == 0 {
		return nil
	}
	out := spans[:1]
	for _, s := range spans[1:] {
		last := &out[len(out)-1]
		if s.Start <= last.End || onlyPunct(src[last.End:s.Start]) {
			last.End = max(last.End, s.End)
			continue
		}
		out = append(out, s)
	}
	return out
}

func onlyPunct(gap []byte) bool {
	for _, c := range gap {
		switch c {
		case ' ', '\t', '\n', '\r', ',', ':', '[', ']', '{', '}':
		default:
			return false
		}
	}
	return true
}
