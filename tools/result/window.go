package result

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// The limits of read_tool_result. Window and Search take what they are
// given; the tool's resolver enforces these.
const (
	// DefaultMaxChars is the page or search budget when the model names none.
	DefaultMaxChars = 4000
	// MinMaxChars is the smallest maxChars the model may ask for.
	MinMaxChars = 1024
	// MaxMaxChars is the largest maxChars the model may ask for.
	MaxMaxChars = 20000
	// MaxRefs is the most refs one call may read.
	MaxRefs = 3
	// DefaultContextChars is the context a search shows each side of a match.
	DefaultContextChars = 200
)

// ErrMaxChars is wrapped by CheckMaxChars.
var ErrMaxChars = errors.New("maxChars out of range")

// CheckMaxChars refuses a maxChars outside [MinMaxChars, MaxMaxChars],
// naming the range so the model can correct its call.
func CheckMaxChars(n int) error {
	if n < MinMaxChars || n > MaxMaxChars {
		return fmt.Errorf("%w: %d is not between %d and %d", ErrMaxChars, n, MinMaxChars, MaxMaxChars)
	}
	return nil
}

// Page is one window of a stored text. Offsets and lengths count Unicode
// characters; an invalid UTF-8 byte counts as one character and reads as
// U+FFFD.
type Page struct {
	// Text is the window's characters.
	Text string `json:"text"`
	// Offset is where Text starts.
	Offset int `json:"offset"`
	// NextOffset is where the next window starts, or -1 when Text reaches
	// the end.
	NextOffset int `json:"nextOffset"`
	// Total is the number of characters in the whole text.
	Total int `json:"total"`
}

// Window returns the characters [offset, offset+maxChars) of text. An
// offset past the end gives an empty page at the end; maxChars <= 0 means
// DefaultMaxChars.
func Window(text string, offset, maxChars int) Page {
	text = sanitize(text)
	if maxChars <= 0 {
		maxChars = DefaultMaxChars
	}
	total := countChars(text)
	offset = min(max(offset, 0), total)
	start, _ := advance(text, 0, offset)
	n := min(maxChars, total-offset)
	end, _ := advance(text, start, n)
	p := Page{Text: strings.Clone(text[start:end]), Offset: offset, NextOffset: -1, Total: total}
	if offset+n < total {
		p.NextOffset = offset + n
	}
	return p
}

// sanitize replaces each invalid UTF-8 byte with U+FFFD, one for one, so
// offsets keep counting the way utf8.RuneCount does and everything after
// can assume valid UTF-8. Valid text, the usual case, is returned as is.
func sanitize(text string) string {
	if utf8.ValidString(text) {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + len(text)/8)
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(text[i : i+size])
		}
		i += size
	}
	return b.String()
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// starts counts the bytes of x that begin a character (are not UTF-8
// continuation bytes).
func starts(x uint64) int {
	return 8 - bits.OnesCount64(x&^(x<<1)&msb)
}

// countChars counts the characters of valid UTF-8, eight bytes at a time:
// stored texts can be many megabytes.
func countChars(s string) int {
	n := 0
	i := 0
	for ; i+8 <= len(s); i += 8 {
		n += starts(le64(s[i:]))
	}
	for ; i < len(s); i++ {
		if s[i]&0xc0 != 0x80 {
			n++
		}
	}
	return n
}

// advance moves n characters forward from byte i of valid UTF-8, stopping
// at the end, and returns the new byte index and the characters moved.
func advance(s string, i, n int) (int, int) {
	moved := 0
	for i+8 <= len(s) {
		c := starts(le64(s[i:]))
		if moved+c > n {
			break
		}
		moved += c
		i += 8
	}
	// i may sit inside a character whose start was counted.
	for i < len(s) && (s[i]&0xc0 == 0x80 || moved < n) {
		if s[i]&0xc0 != 0x80 {
			moved++
		}
		i++
	}
	return i, moved
}

// retreat moves n characters back from byte i of valid UTF-8, stopping at
// the start, and returns the new byte index and the characters moved.
func retreat(s string, i, n int) (int, int) {
	moved := 0
	for i >= 8 && moved+8 <= n && le64(s[i-8:])&msb == 0 {
		moved += 8
		i -= 8
	}
	for i > 0 && moved < n {
		i--
		for i > 0 && s[i]&0xc0 == 0x80 {
			i--
		}
		moved++
	}
	return i, moved
}
