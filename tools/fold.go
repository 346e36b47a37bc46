package tools

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Case folding, written once for the families that match text case aside
// (transcripts, stored results, workspace files): simple case folding, one
// character for one, so offsets counted in characters stay right.

// FoldRune maps r to the one character its whole case-folding orbit maps
// to: ASCII letters to lower case, others to the smallest member of their
// orbit, lowered when that is an ASCII letter (so the Kelvin sign folds to
// 'k').
func FoldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	if 'A' <= m && m <= 'Z' {
		return m + 'a' - 'A'
	}
	return m
}

// Fold maps every character of s by FoldRune: texts equal under simple
// case folding become equal strings, with as many characters as before.
func Fold(s string) string { return strings.Map(FoldRune, s) }

// CaseVariants returns r and every character that folds with it, r first.
func CaseVariants(r rune) []rune {
	out := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		out = append(out, f)
	}
	return out
}
