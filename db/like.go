package db

import (
	"database/sql/driver"
	"fmt"
	"strconv"
	"unicode/utf8"

	"modernc.org/sqlite"
)

// SQLite's own LIKE reads its operands as C strings: it stops at the first
// NUL, so "Ada\x00Lovelace" LIKE '%Lovelace%' is false, and a pattern with
// a NUL matches on what comes before it alone. Text keeps a NUL on SQLite
// (package pgtext), so LIKE is replaced, for every connection, with one that reads
// the whole of both: the same rules otherwise (% any run, _ one character,
// ASCII letters in either case, an optional ESCAPE character). PostgreSQL
// needs nothing: a NUL is stored escaped there, and its escape is matched
// like any other characters.
func init() {
	// VolatileArgs: the text is read with its length (sqlite3_value_bytes),
	// not as a C string; likeFunc keeps nothing of it past the call.
	sqlite.MustRegisterFunction("like", &sqlite.FunctionImpl{NArgs: -1, Deterministic: true, VolatileArgs: true, Scalar: likeFunc})
}

// likeFunc is like(pattern, text[, escape]), as SQLite calls it for
// `text LIKE pattern [ESCAPE escape]`.
func likeFunc(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	if len(args) != 2 && len(args) != 3 {
		return nil, fmt.Errorf("like: %d arguments, want 2 or 3", len(args))
	}
	if args[0] == nil || args[1] == nil {
		return nil, nil
	}
	var esc rune = -1
	if len(args) == 3 {
		if args[2] == nil {
			return nil, nil
		}
		e := sqlText(args[2])
		if utf8.RuneCountInString(e) != 1 {
			return nil, fmt.Errorf("ESCAPE expression must be a single character")
		}
		esc, _ = utf8.DecodeRuneInString(e)
	}
	if likeMatch(sqlText(args[0]), sqlText(args[1]), esc) {
		return int64(1), nil
	}
	return int64(0), nil
}

func sqlText(v driver.Value) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// likeMatch reports whether text matches pattern as SQLite's LIKE does,
// over the whole of both strings; esc is the escape character, or -1.
func likeMatch(pattern, text string, esc rune) bool {
	p, t := []rune(pattern), []rune(text)
	pi, ti := 0, 0
	star, from := -1, 0 // the last % seen, and where its run began in text
	for ti < len(t) {
		if pi < len(p) {
			switch c := p[pi]; {
			case c == esc && pi+1 < len(p):
				if foldASCII(p[pi+1]) == foldASCII(t[ti]) {
					pi, ti = pi+2, ti+1
					continue
				}
			case c == '%':
				star, from = pi, ti
				pi++
				continue
			case c == '_':
				pi, ti = pi+1, ti+1
				continue
			case foldASCII(c) == foldASCII(t[ti]):
				pi, ti = pi+1, ti+1
				continue
			}
		}
		if star < 0 {
			return false
		}
		from++
		pi, ti = star+1, from
	}
	for pi < len(p) && p[pi] == '%' {
		pi++
	}
	return pi == len(p)
}

func foldASCII(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}
