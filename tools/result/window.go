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
	if validUTF8(text) {
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
	for ; i+32 <= len(s); i += 32 {
		t := s[i : i+32]
		a, b, c, d := le64(t), le64(t[8:]), le64(t[16:]), le64(t[24:])
		if (a|b|c|d)&msb == 0 {
			n += 32 // ASCII, the usual case
			continue
		}
		n += starts(a) + starts(b) + starts(c) + starts(d)
	}
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

// validUTF8 is utf8.ValidString, 64 bytes at a time: on dense non-ASCII
// text the standard check, byte by byte, cost as much as a fuzzy search.
// Each block is mapped to bitmaps of its continuation bytes and of the
// bytes that lead two-, three- and four-byte characters; it is valid when
// the continuation bytes are exactly those the leads call for. Leads with
// a narrower range for the next byte (E0, ED, F0, F4) have it checked one
// by one; bytes that never occur (C0, C1, F5–FF) fail the block.
func validUTF8(s string) bool {
	var carry uint64
	ok := true
	for ok && len(s) >= 64 {
		var ascii bool
		carry, ascii, ok = validBlock(s, carry)
		s = s[64:]
		if ascii {
			// More ASCII likely follows: pass over it faster.
			s = s[asciiPrefix(s):]
		}
	}
	if ok && len(s) > 0 {
		// Pad the tail with NULs: a character cut short then lacks its
		// continuation bytes, as it should.
		var buf [65]byte
		copy(buf[:], s)
		carry, _, ok = validBlock(string(buf[:]), carry)
	}
	return ok && carry == 0
}

// asciiPrefix is the length of s's leading ASCII, rounded down to 32
// bytes: a loop this tight runs several times faster than validBlock.
func asciiPrefix(s string) int {
	i := 0
	for ; i+32 <= len(s); i += 32 {
		t := s[i : i+32]
		if (le64(t)|le64(t[8:])|le64(t[16:])|le64(t[24:]))&msb != 0 {
			break
		}
	}
	return i
}

// validBlock checks the first 64 bytes of s, given the continuation bytes
// the block before calls for at its start (carry), and returns those this
// block calls for at the next one's, and whether the block was ASCII.
func validBlock(s string, carry uint64) (next uint64, ascii, ok bool) {
	var or uint64
	for k := range 8 {
		or |= le64(s[k*8:])
	}
	if or&msb == 0 {
		return 0, carry == 0, carry == 0
	}
	var cont, l2, l3, l4, bad, special uint64
	for k := range 8 {
		x := le64(s[k*8:])
		hi := x & msb
		if hi == 0 {
			continue
		}
		b6, b5 := x<<1, x<<2
		lead := hi & b6
		shift := 8 * k
		cont |= pack(hi&^b6) << shift
		two := lead &^ b5
		l2 |= pack(two) << shift
		// C0 and C1; bad bytes are only counted, so their lanes need
		// no packing.
		bad |= two & zeroBytes(x&(lsb*0x1E))
		long := lead & b5 // E0–FF
		if long == 0 {
			continue // Latin, Greek, Cyrillic…: no longer characters here
		}
		b4, b3 := x<<3, x<<4
		f := long & b4 // F0–FF
		l3 |= pack(long&^b4) << shift
		l4 |= pack(f&^b3) << shift
		// F8–FF, F5–F7
		bad |= f&b3 | f&((x&(lsb*7)+lsb*3)<<4)
		// E0 and F0 (the leads with a low nibble of 0), ED, F4: rare.
		if sp := long & (zeroBytes(x&(lsb*0x0F)) | zeroBytes(x^lsb*0xED) | zeroBytes(x^lsb*0xF4)); sp != 0 {
			special |= pack(sp) << shift
		}
	}
	if bad != 0 {
		return 0, false, false
	}
	want := carry | l2<<1 | l3<<1 | l3<<2 | l4<<1 | l4<<2 | l4<<3
	if want != cont {
		return 0, false, false
	}
	for special != 0 {
		i := bits.TrailingZeros64(special)
		special &= special - 1
		if i+1 >= len(s) {
			return 0, false, false
		}
		lo, hi := byte(0x80), byte(0xBF)
		switch s[i] {
		case 0xE0:
			lo = 0xA0
		case 0xED:
			hi = 0x9F
		case 0xF0:
			lo = 0x90
		case 0xF4:
			hi = 0x8F
		}
		if c := s[i+1]; c < lo || c > hi {
			return 0, false, false
		}
	}
	return l2>>63 | l3>>63 | l3>>62 | l4>>63 | l4>>62 | l4>>61, false, true
}

// zeroBytes sets the top bit of each byte of x that is zero, and only
// those.
func zeroBytes(x uint64) uint64 {
	const low7 = lsb * 0x7F
	return ^((x&low7 + low7) | x | low7)
}
