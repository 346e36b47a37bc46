package preview

import (
	"strconv"
	"unicode/utf8"
)

// snapWindow is how many characters a cut may give up to fall after a line
// break instead of mid-line.
const snapWindow = 200

func buildText(src []byte, c Context, counts Counts, limit int) (Result, error) {
	const (
		mid1 = `","omitted":{"fromChar":`
		mid2 = `,"toChar":`
		mid3 = `},"tail":"`
		end  = `"}`
	)
	out := make([]byte, 0, limit+limit/4)
	out = append(out, '{')
	out = appendContext(out, c, counts)
	out = append(out, `,"head":"`...)
	avail := limit - utf8.RuneCount(out) - len(mid1) - len(mid2) - len(mid3) - len(end) - 2*digits(int(counts.Chars))
	if avail < 2 {
		return Result{}, errNoRoom(limit)
	}
	headEnd, headCost, headChars := textHead(src, avail*3/4)
	tailStart, tailChars := textTail(src, headEnd, avail-headCost)

	out = appendEscaped(out, src[:headEnd])
	out = append(out, mid1...)
	out = strconv.AppendInt(out, int64(headChars), 10)
	out = append(out, mid2...)
	out = strconv.AppendInt(out, max(int64(headChars), counts.Chars-int64(tailChars)), 10)
	out = append(out, mid3...)
	out = appendEscaped(out, src[tailStart:])
	out = append(out, end...)
	if err := checkLimit(out, limit); err != nil {
		return Result{}, err
	}
	var spans []Span
	if headEnd > 0 {
		spans = append(spans, Span{0, int64(headEnd)})
	}
	if tailStart < len(src) {
		spans = append(spans, Span{int64(tailStart), int64(len(src))})
	}
	return Result{Body: out, Partial: true, Visible: spans}, nil
}

// textHead returns where the head of src ends to fit budget encoded
// characters, what it costs and how many characters it holds.
func textHead(src []byte, budget int) (end, cost, chars int) {
	lineEnd, lineCost, lineChars := -1, 0, 0
	for end < len(src) {
		r, size := rune(src[end]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(src[end:])
		}
		c := escCost(r)
		if cost+c > budget {
			break
		}
		cost += c
		chars++
		end += size
		if r == '\n' {
			lineEnd, lineCost, lineChars = end, cost, chars
		}
	}
	if end < len(src) && lineEnd > 0 && chars-lineChars <= min(snapWindow, chars/8) {
		return lineEnd, lineCost, lineChars
	}
	return end, cost, chars
}

// textTail returns where the tail of src starts, no earlier than from, to
// fit budget encoded characters, and how many characters it holds.
func textTail(src []byte, from, budget int) (start, chars int) {
	start = len(src)
	cost := 0
	lineStart, lineChars := -1, 0
	for start > from {
		r, size := utf8.DecodeLastRune(src[from:start])
		c := escCost(r)
		if cost+c > budget {
			break
		}
		cost += c
		chars++
		start -= size
		if start > 0 && src[start-1] == '\n' {
			lineStart, lineChars = start, chars
		}
	}
	if start > from && lineStart >= 0 && chars-lineChars <= min(snapWindow, chars/8) {
		return lineStart, lineChars
	}
	return start, chars
}

// escCost is how many characters r takes inside a JSON string.
func escCost(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20:
		return 6
	}
	return 1
}

// appendString writes s as a JSON string.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendEscaped writes s escaped for a JSON string, with each invalid
// UTF-8 byte replaced by U+FFFD so the preview stays valid.
func appendEscaped(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	return append(dst, s[start:]...)
}
