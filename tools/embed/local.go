package embed

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"
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
	var word []byte
	var starts []int
	for _, w := range strings.FieldsFunc(strings.ToLower(text), notWordRune) {
		add(v, fnvString(fnvString(fnvOffset, "w:"), w), wordWeight)
		if prev != "" {
			add(v, fnvString(fnvString(fnvString(fnvString(fnvOffset, "p:"), prev), " "), w), pairWeight)
		}
		prev = w
		if utf8.RuneCountInString(w) > maxWordRune {
			continue
		}
		// The word between ^ and $, and the byte offset of each rune.
		word = append(append(append(word[:0], '^'), w...), '$')
		starts = runeStarts(starts[:0], word)
		for n := 3; n <= 4; n++ {
			for i := 0; i+n < len(starts); i++ {
				add(v, fnvBytes(fnvString(fnvOffset, "g:"), word[starts[i]:starts[i+n]]), gramWeight)
			}
		}
	}
	return Normalize(v)
}

// runeStarts appends to out the byte offset of each rune of b, and len(b)
// last.
func runeStarts(out []int, b []byte) []int {
	for i := 0; i < len(b); {
		out = append(out, i)
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return append(out, len(b))
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// add adds w to the bucket of feature hash h, with a sign from the hash,
// so collisions cancel out on average instead of piling up.
func add(v []float32, h uint64, w float32) {
	i := h % uint64(len(v))
	if h>>63 == 1 {
		w = -w
	}
	v[i] += w
}

// FNV-1a: stable across processes and versions, unlike maphash; fed piece
// by piece, so a feature's hash needs no string built for it.
const (
	fnvOffset = uint64(14695981039346656037)
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func fnvBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}
