package result

import (
	"math/bits"
	"unicode"
	"unicode/utf8"
)

// The fuzzy search as it was before the bit-parallel distance and the
// fold tables: the reference the differential test holds the fast one to.

// refFold maps a character to the one every character of its case-folding
// orbit maps to: ASCII letters to lower case, others to the smallest
// member of their orbit (lowered when that is an ASCII letter, so 'K'
// the Kelvin sign folds to 'k').
func refFold(r rune) rune {
	if r < utf8.RuneSelf {
		return rune(lower[r])
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	if m < utf8.RuneSelf {
		return rune(lower[m])
	}
	return m
}

// refQword is one word of a refFuzzy query.
type refQword struct {
	runes []rune // folded
	mask  uint64 // letter set
	k     int    // edits allowed
}

// refFuzzy is a compiled refFuzzy query.
type refFuzzy struct {
	words []refQword
	// trigger is the query word tried on every text word; text words of
	// minLen to minLen+spread characters can match it.
	trigger, minLen, spread int
	// scratch for the edit distance
	word             []rune
	prev2, prev, row []int
}

// refNewFuzzy compiles query, or returns nil when it has no words or too many.
func refNewFuzzy(query string) *refFuzzy {
	f := &refFuzzy{}
	maxLen := 0
	refForWords(query, func(start, end int, mask uint64) {
		var w refQword
		digit := false
		for _, r := range query[start:end] {
			w.runes = append(w.runes, refFold(r))
			digit = digit || unicode.IsDigit(r)
		}
		w.mask = mask
		switch n := len(w.runes); {
		case digit || n <= 3:
			w.k = 0
		case n <= 7:
			w.k = 1
		default:
			w.k = 2
		}
		f.words = append(f.words, w)
		maxLen = max(maxLen, len(w.runes))
	})
	if len(f.words) == 0 || len(f.words) > maxQueryWords {
		return nil
	}
	for j, w := range f.words {
		if n := len(w.runes) - w.k; n > f.minLen {
			f.trigger, f.minLen, f.spread = j, n, 2*w.k
		}
	}
	f.word = make([]rune, 0, maxLen+2)
	f.prev2, f.prev, f.row = make([]int, maxLen+1), make([]int, maxLen+1), make([]int, maxLen+1)
	return f
}

// refRuneBit puts a non-ASCII word character in one of bits 36–63 of a
// letter set; sharing bits only weakens the filter, never wrongs it.
func refRuneBit(r rune) uint64 {
	f := refFold(r)
	if f < utf8.RuneSelf {
		return wordBit[f]
	}
	return 1 << (36 + uint(f)%28)
}

func refIsWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// refForWords calls fn with each word of text, its bytes [start, end) and
// its letter set. It tokenizes queries; find applies the same rules
// faster.
func refForWords(text string, fn func(start, end int, mask uint64)) {
	for i := 0; i < len(text); {
		start, end, _ := refNextWord(text, i)
		if start == end {
			break
		}
		fn(start, end, refWordMask(text[start:end]))
		i = end
	}
}

// refNextWord finds the first word at or after byte i: its bytes [start, end)
// and how many of them are UTF-8 continuation bytes. start == end means
// there is none. Words are runs of letters, digits and combining marks.
func refNextWord(text string, i int) (start, end, extra int) {
	n := len(text)
	for i < n {
		c := text[i]
		if isWord[c] {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if refIsWordRune(r) {
			break
		}
		i += size
	}
	start = i
	for i < n {
		c := text[i]
		if isWord[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if !refIsWordRune(r) {
			break
		}
		i += size
		extra += size - 1
	}
	return start, i, extra
}

// refWordMask is the letter set of a word.
func refWordMask(word string) uint64 {
	var mask uint64
	for i := 0; i < len(word); {
		if c := word[i]; c < utf8.RuneSelf {
			mask |= wordBit[c]
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(word[i:])
		mask |= refRuneBit(r)
		i += size
	}
	return mask
}

// find returns the non-overlapping runs of text words that match the
// query's words in order, each with its total edits.
//
// Tokenizing byte by byte costs two mispredicted branches per word, which
// is most of the time on prose, so words are found 64 bytes at a time: a
// bitmap of the bytes that can be in a word (ASCII letters and digits,
// and any non-ASCII byte), whose edges are the word boundaries. A run
// with non-ASCII bytes is split again by the exact rules. Most words are
// then dismissed by their length alone, the rest mostly by their letter
// sets; only the few left get an edit distance.
func (f *refFuzzy) find(text string) []hit {
	s := refNewRunner(f, text)
	start, spanFrom := -1, 0
	var na bool
	for base := 0; base < len(text); base += 64 {
		w, nonASCII := refClassify(text[base:min(base+64, len(text))])
		var carry uint64
		if start >= 0 {
			carry = 1
		}
		edges := w ^ (w<<1 | carry) // first byte of each run and first byte after it
		for edges != 0 {
			b := bits.TrailingZeros64(edges)
			edges &= edges - 1
			if w>>b&1 != 0 {
				start, spanFrom, na = base+b, b, false
				continue
			}
			na = na || nonASCII&refBetween(spanFrom, b) != 0
			s.span(start, base+b, na)
			start = -1
		}
		if start >= 0 {
			na = na || nonASCII&refBetween(spanFrom, 64) != 0
			spanFrom = 0
		}
	}
	if start >= 0 {
		s.span(start, len(text), na)
	}
	return s.hits
}

// refRunner feeds text words through a refFuzzy query. Each word is tried
// against one query word only, the trigger: the one whose length rules
// out the most text words. When the trigger matches, the words around it
// are tried against the rest of the query, once the last of them is read.
type refRunner struct {
	f       *refFuzzy
	text    string
	ring    []refSlot // the last len(f.words) words
	next    int       // the refSlot the next word goes in; it holds the oldest
	t       int       // index of the current word
	free    int       // first word index a new hit may start at
	pending []int     // word indexes at which a triggered run ends
	hits    []hit
}

type refSlot struct {
	start, end, chars int
}

func refNewRunner(f *refFuzzy, text string) *refRunner {
	return &refRunner{f: f, text: text, ring: make([]refSlot, len(f.words)), t: -1}
}

// span takes a run of word bytes: one word, or with non-ASCII bytes,
// possibly several or none.
func (r *refRunner) span(start, end int, nonASCII bool) {
	if !nonASCII {
		r.word(start, end, end-start)
		return
	}
	for i := start; i < end; {
		ws, we, extra := refNextWord(r.text[:end], i)
		if ws == we {
			return
		}
		r.word(ws, we, we-ws-extra)
		i = we
	}
}

func (r *refRunner) word(start, end, chars int) {
	f := r.f
	m := len(f.words)
	r.t++
	r.ring[r.next] = refSlot{start, end, chars}
	if r.next++; r.next == m {
		r.next = 0
	}
	if uint(chars-f.minLen) <= uint(f.spread) {
		if _, ok := f.match(r.text[start:end], chars, f.trigger); ok {
			r.pending = append(r.pending, r.t+m-1-f.trigger)
		}
	}
	for len(r.pending) > 0 && r.pending[0] <= r.t {
		r.pending = r.pending[:copy(r.pending, r.pending[1:])]
		r.try()
	}
}

// try checks the last len(f.words) words against the whole query.
func (r *refRunner) try() {
	f := r.f
	m := len(f.words)
	if r.t-m+1 < r.free {
		return
	}
	edits := 0
	for j := range m {
		w := r.ring[(r.next+j)%m]
		d, ok := f.match(r.text[w.start:w.end], w.chars, j)
		if !ok {
			return
		}
		edits += d
	}
	r.hits = append(r.hits, hit{start: r.ring[r.next].start, end: r.ring[(r.next+m-1)%m].end, edits: edits})
	r.free = r.t + 1
}

// match reports whether a text word of chars characters matches query
// word j, and with how many edits. Length and letter set rule out most
// words before the edit distance.
func (f *refFuzzy) match(word string, chars, j int) (int, bool) {
	w := &f.words[j]
	if d := chars - len(w.runes); d > w.k || -d > w.k {
		return 0, false
	}
	mask := refWordMask(word)
	if bits.OnesCount64(w.mask&^mask) > w.k || bits.OnesCount64(mask&^w.mask) > w.k {
		return 0, false
	}
	f.word = f.word[:0]
	for _, c := range word {
		f.word = append(f.word, refFold(c))
	}
	d := f.distance(f.word, w.runes, w.k)
	return d, d <= w.k
}

// distance is the optimal string alignment distance between a and b (an
// edit inserts, deletes or replaces a character, or swaps two neighbours),
// or k+1 once it must exceed k.
func (f *refFuzzy) distance(a, b []rune, k int) int {
	if d := len(a) - len(b); d > k || -d > k {
		return k + 1
	}
	prev2, prev, row := f.prev2[:len(b)+1], f.prev[:len(b)+1], f.row[:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		row[0] = i
		best := i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, row[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			row[j] = v
			best = min(best, v)
		}
		if best > k {
			return k + 1
		}
		prev2, prev, row = prev, row, prev2
	}
	return min(prev[len(b)], k+1)
}

// refClassify maps up to 64 bytes to two bitmaps: bytes that can be in a
// word (ASCII letters and digits, non-ASCII bytes), and non-ASCII bytes.
// Eight bytes at a time, without branches.
func refClassify(b string) (word, nonASCII uint64) {
	if len(b) < 64 {
		for j := range len(b) {
			if c := b[j]; isWord[c] || c >= utf8.RuneSelf {
				word |= 1 << j
			}
			if b[j] >= utf8.RuneSelf {
				nonASCII |= 1 << j
			}
		}
		return word, nonASCII
	}
	for k := range 8 {
		x := le64(b[k*8:])
		hi := x & msb
		x7 := x &^ msb // no byte can carry into the next below
		y := x7 | lsb*0x20
		letters := (y + lsb*(0x80-'a')) &^ (y + lsb*(0x80-'z'-1))
		digits := (x7 + lsb*(0x80-'0')) &^ (x7 + lsb*(0x80-'9'-1))
		word |= refPack((letters|digits)&msb|hi) << (8 * k)
		nonASCII |= refPack(hi) << (8 * k)
	}
	return word, nonASCII
}

// refPack gathers the top bits of eight bytes into eight bits, byte 0 lowest.
func refPack(x uint64) uint64 {
	return (x >> 7 * 0x0102040810204080) >> 56
}

// refBetween sets bits [from, to) of a uint64.
func refBetween(from, to int) uint64 {
	hi := ^uint64(0)
	if to < 64 {
		hi = 1<<to - 1
	}
	return hi &^ (1<<from - 1)
}

// refFindFolded looks for a query with non-ASCII characters, comparing folded
// characters one by one.
func refFindFolded(text, query string) []hit {
	var q []rune
	for _, r := range query {
		q = append(q, refFold(r))
	}
	var hits []hit
	for i := 0; i < len(text); {
		// Jump to a byte that can begin q[0]: any non-ASCII byte can, as
		// some characters fold to ASCII ones.
		if q[0] < utf8.RuneSelf {
			for i < len(text) && text[i] < utf8.RuneSelf && rune(lower[text[i]]) != q[0] {
				i++
			}
		} else {
			for i < len(text) && text[i] < utf8.RuneSelf {
				i++
			}
		}
		if i >= len(text) {
			break
		}
		if end, ok := refMatchFoldedAt(text, i, q); ok {
			hits = append(hits, hit{start: i, end: end})
			i = end
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return hits
}

func refMatchFoldedAt(text string, i int, q []rune) (int, bool) {
	for _, want := range q {
		if i >= len(text) {
			return 0, false
		}
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		if refFold(r) != want {
			return 0, false
		}
		i += size
	}
	return i, true
}
