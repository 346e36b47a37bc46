package document

import (
	"strings"
	"unicode"
)

// Chunking: passages of about ChunkChars characters, cut at a paragraph,
// sentence or word boundary, each overlapping the last by ChunkOverlap so
// that a sentence cut in two is still found whole.
const (
	ChunkChars   = 1_000
	ChunkOverlap = 120
)

// Piece is one passage of a text: Position is the offset, in characters,
// of its first character.
type Piece struct {
	Position int
	Text     string
}

// Chunk cuts text into passages.
func Chunk(text string) []Piece {
	runes := []rune(text)
	var out []Piece
	start := 0
	for start < len(runes) {
		end := min(start+ChunkChars, len(runes))
		if end < len(runes) {
			end = cut(runes, start, end)
		}
		if t := strings.TrimSpace(string(runes[start:end])); t != "" {
			out = append(out, Piece{Position: start, Text: t})
		}
		if end == len(runes) {
			break
		}
		next := max(end-ChunkOverlap, start+1)
		// Start the overlap at a word.
		for next < end && !unicode.IsSpace(runes[next-1]) {
			next++
		}
		start = next
	}
	return out
}

// cut moves end back to the best boundary in the last third of the window.
func cut(runes []rune, start, end int) int {
	floor := start + 2*(end-start)/3
	for _, good := range []func(i int) bool{
		func(i int) bool { return runes[i-1] == '\n' && i >= 2 && runes[i-2] == '\n' },
		func(i int) bool { return runes[i-1] == '\n' },
		func(i int) bool {
			return unicode.IsSpace(runes[i]) && i >= 1 && strings.ContainsRune(".!?;:", runes[i-1])
		},
		func(i int) bool { return unicode.IsSpace(runes[i]) },
	} {
		for i := end; i > floor; i-- {
			if i < len(runes) && good(i) {
				return i
			}
		}
	}
	return end
}
