// Package pgtext lets PostgreSQL's text hold what SQLite's does.
//
// PostgreSQL's text cannot hold a NUL character or bytes that are not
// UTF-8, which tools and users may send; SQLite keeps them. db/conn's
// escaping layer lets PostgreSQL keep them too: every string written
// through ent is escaped (Escape), every string read is unescaped
// (Unescape), so what is read back is what was written, on both
// databases. The escape is a private-use character,
// itself escaped where it occurs:
//
//	NUL        → esc '0'
//	esc        → esc esc
//	a bad byte → esc 'x' and two hex digits
//
// Bytes fields ([]byte) pass untouched: bytea keeps any byte.
package pgtext

import (
	"strings"
	"unicode/utf8"

	"entgo.io/ent/dialect"
)

// esc is the escape: a private-use character.
const esc = '\uE000'

// escFirst is the first byte of esc in UTF-8.
var escFirst = string(esc)[0]

// NeedsEscape reports whether s holds anything PostgreSQL's text cannot
// keep as it is.
func NeedsEscape(s string) bool {
	return strings.IndexByte(s, 0) >= 0 || strings.ContainsRune(s, esc) || !utf8.ValidString(s)
}

const hexDigits = "0123456789abcdef"

// Escape is s as stored in PostgreSQL's text.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(esc)
			b.WriteByte('x')
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		case r == 0:
			b.WriteRune(esc)
			b.WriteByte('0')
		case r == esc:
			b.WriteRune(esc)
			b.WriteRune(esc)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Unescape is what an escaped string was written as.
func Unescape(s string) string {
	// Most text has no byte of esc's first at all, which IndexByte
	// finds out far faster than ContainsRune looks for the character.
	if strings.IndexByte(s, escFirst) < 0 || !strings.ContainsRune(s, esc) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.IndexRune(s, esc)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+utf8.RuneLen(esc):]
		switch {
		case strings.HasPrefix(s, "0"):
			b.WriteByte(0)
			s = s[1:]
		case strings.HasPrefix(s, string(esc)):
			b.WriteRune(esc)
			s = s[utf8.RuneLen(esc):]
		case len(s) >= 3 && s[0] == 'x' && isHex(s[1]) && isHex(s[2]):
			b.WriteByte(unhex(s[1])<<4 | unhex(s[2]))
			s = s[3:]
		default:
			// Not one of ours (written before escaping began): as it is.
			b.WriteRune(esc)
		}
	}
}

func isHex(c byte) bool { return strings.IndexByte(hexDigits, c) >= 0 }

func unhex(c byte) byte { return byte(strings.IndexByte(hexDigits, c)) }

// escapeSequences matches, in PostgreSQL's regular expressions, what
// Escape writes for a NUL, a byte that is not UTF-8 and the escape
// itself.
const escapeSequences = string(esc) + `(0|x[0-9a-f]{2}|` + string(esc) + `)`

// WordsSQL returns an SQL expression of the text column expr as full-text
// search should read it. On PostgreSQL each escape (a NUL, a byte that is
// not UTF-8, the escape character) reads as a space, as a NUL does on
// SQLite: "Ada\x00Lovelace" holds the words Ada and Lovelace on both,
// not a word "0Lovelace".
func WordsSQL(dialectName, expr string) string {
	if dialectName != dialect.Postgres {
		return expr
	}
	return "regexp_replace(" + expr + ", '" + escapeSequences + "', ' ', 'g')"
}

// Read is what a string read through a raw query (QueryContext) was
// written as: on PostgreSQL, the driver's escapes undone, as ent's own
// reads undo them.
func Read(dialectName, s string) string {
	if dialectName != dialect.Postgres {
		return s
	}
	return Unescape(s)
}
