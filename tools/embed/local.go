package embed

import (
	"context"
	"strings"
	"unicode"
)

// LocalModel names the local embedder's model; LocalDimensions is the
// length of its vectors.
const (
	LocalModel      = "local-lexical-v1"
	LocalDimensions = 512
)

// Local is the built-in offline embedder. It hashes words, word pairs and
// the character 3- and 4-grams of each word into a fixed vector (signed
// feature hashing), so texts that share words or word parts
// ("reimbursed", "reimbursement") come out close. It is lexical: it knows
// no meaning, and a paraphrase with no word in common is not close. It is
// for demos, tests and offline use, and is labelled so in the catalogue.
type Local struct{}

// NewLocal returns the local embedder.
func NewLocal() *Local { return &Local{} }

// Provider returns "local".
func (*Local) Provider() string { return ProviderLocal }

// Model returns LocalModel.
func (*Local) Model() string { return LocalModel }

// Lexical returns true.
func (*Local) Lexical() bool { return true }

// Embed vectorises each text; it makes no request and fails only on bad
// input or a cancelled context.
func (l *Local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := checkTexts(texts); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = Vector(t)
	}
	return out, nil
}

// Feature weights: whole words say most, pairs keep a little order, word
// parts catch inflections and compounds.
const (
	wordWeight  = 1.0
	pairWeight  = 0.5
	gramWeight  = 0.25
	maxWordRune = 40 // longer "words" (hashes, base64) add no n-grams
)

// Vector is the local embedding of one text.
func Vector(text string) []float32 {
	v := make([]float32, LocalDimensions)
	var prev string
	var runes []rune
	for _, w := range strings.FieldsFunc(strings.ToLower(text), notWordRune) {
		add(v, "w:"+w, wordWeight)
		if prev != "" {
			add(v, "p:"+prev+" "+w, pairWeight)
		}
		prev = w
		runes = append(runes[:0], '^')
		runes = append(runes, []rune(w)...)
		runes = append(runes, '$')
		if len(runes) > maxWordRune+2 {
			continue
		}
		for n := 3; n <= 4; n++ {
			for i := 0; i+n <= len(runes); i++ {
				add(v, "g:"+string(runes[i:i+n]), gramWeight)
			}
		}
	}
	return Normalize(v)
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// add hashes a feature to a bucket and a sign, so collisions cancel out
// on average instead of piling up.
func add(v []float32, feature string, w float32) {
	h := fnv64(feature)
	i := h % uint64(len(v))
	if h>>63 == 1 {
		w = -w
	}
	v[i] += w
}

// fnv64 is FNV-1a: stable across processes and versions, unlike maphash.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
