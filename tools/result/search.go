package result

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/tools"
)

// Match is how Search compares the query with the text.
type Match string

// The match modes.
const (
	// Exact finds the query literally, ignoring case (Unicode simple case
	// folding; a query that is all ASCII folds ASCII letters only).
	Exact Match = "exact"
	// Fuzzy finds the query's words in a row, each allowed a few typos by
	// its length: words of up to 3 characters, and words with a digit, must
	// match exactly; words of 4 to 7 characters may be one edit away; words
	// of 8 or more, two. An edit inserts, deletes or replaces a character,
	// or swaps two neighbours. Words are runs of letters and digits; the
	// text's words must follow one another with only separators between
	// them, whatever those are; case is ignored. A query without words is
	// searched as Exact.
	Fuzzy Match = "fuzzy"
)

// maxQueryWords bounds a fuzzy query; longer queries are matched exactly.
const maxQueryWords = 64

// Excerpt is one window of a search result: matches with their context.
type Excerpt struct {
	// Offset is where Text starts, in characters.
	Offset int `json:"offset"`
	// Text is the matches and up to contextChars each side.
	Text string `json:"text"`
	// MatchOffset is where the excerpt's best match starts, in characters.
	MatchOffset int `json:"matchOffset"`
	// Edits is the fewest edits of a match in the excerpt; 0 is exact.
	Edits int `json:"edits"`
	// Hits is how many matches lie wholly in Text.
	Hits int `json:"hits"`
}

// SearchResult is what Search found.
type SearchResult struct {
	// Excerpts are best first: fewest edits, then earliest.
	Excerpts []Excerpt `json:"excerpts"`
	// Hits is the number of matches in the whole text, shown or not.
	Hits int `json:"hits"`
	// Shown is the number of matches inside the excerpts.
	Shown int `json:"shown"`
	// Total is the number of characters in the whole text.
	Total int `json:"total"`
}

// Search finds query in text and returns excerpts around the matches: each
// match with contextChars characters each side, overlapping excerpts merged,
// best first, their texts together within maxChars characters. An excerpt
// that does not fit what is left is cut down around its best match; one
// whose best match alone does not fit is left out. Hits counts every match
// even so. An empty query matches nothing; an unknown match mode is Exact;
// maxChars <= 0 means DefaultMaxChars.
func Search(text, query string, match Match, contextChars, maxChars int) SearchResult {
	return searchClean(sanitize(text), query, match, contextChars, maxChars)
}

// searchClean is Search of text already sanitized.
func searchClean(text, query string, match Match, contextChars, maxChars int) SearchResult {
	var q *fuzzy
	if match == Fuzzy {
		q = newFuzzy(query)
	}
	if q != nil {
		hits, total := q.find(text)
		return excerpts(text, hits, total, contextChars, maxChars)
	}
	return excerpts(text, findExact(text, query), -1, contextChars, maxChars)
}

// excerpts turns the hits in text into Search's result. total is the
// text's characters, the hits' character offsets set, when the search
// counted them; -1 when it did not.
func excerpts(text string, hits []hit, total, contextChars, maxChars int) SearchResult {
	if maxChars <= 0 {
		maxChars = DefaultMaxChars
	}
	contextChars = max(contextChars, 0)
	windows, total := merge(text, hits, total, contextChars)
	res := SearchResult{Hits: len(hits), Total: total}
	slices.SortStableFunc(windows, func(a, b window) int {
		return cmp.Compare(hits[a.best].edits, hits[b.best].edits)
	})
	left := maxChars
	for _, w := range windows {
		if left <= 0 {
			break
		}
		best := hits[w.best]
		ex := Excerpt{Offset: w.startChar, MatchOffset: best.startChar, Edits: best.edits}
		start, end := w.start, w.end
		if chars := w.endChar - w.startChar; chars <= left {
			left -= chars
		} else {
			// Cut down around the best match, context shared between sides.
			need := best.endChar - best.startChar
			if need > left {
				continue
			}
			extra := left - need
			before, after := best.startChar-w.startChar, w.endChar-best.endChar
			l := min(extra/2, before)
			r := min(extra-l, after)
			l = min(extra-r, before)
			start, _ = retreat(text, best.start, l)
			end, _ = advance(text, best.end, r)
			ex.Offset = best.startChar - l
			left -= need + l + r
		}
		ex.Text = strings.Clone(text[start:end])
		for _, h := range hits[w.first:w.last] {
			if h.start >= start && h.end <= end {
				ex.Hits++
			}
		}
		res.Shown += ex.Hits
		res.Excerpts = append(res.Excerpts, ex)
	}
	return res
}

// hit is one match: bytes [start, end) of the text.
type hit struct {
	start, end int
	edits      int
	startChar  int
	endChar    int
}

// window is a run of matches whose contexts overlap.
type window struct {
	start, end         int // bytes
	startChar, endChar int
	first, last        int // hits[first:last] are in the window
	best               int // the hit with fewest edits, earliest first
}

// merge gives each hit its character offsets, unless total (the text's
// characters) is known (>= 0), and groups hits whose contexts overlap or
// touch into windows, in text order. It also returns the text's length in
// characters. Characters are counted once, from one hit to the next, so
// this is linear in the text whatever the hits.
func merge(text string, hits []hit, total, contextChars int) ([]window, int) {
	var windows []window
	pos, chars := 0, 0
	charAt := func(b int) int {
		chars += countChars(text[pos:b])
		pos = b
		return chars
	}
	counted := total >= 0
	closeWindow := func(w *window) {
		first, last := hits[w.first], hits[w.last-1]
		var n int
		w.start, n = retreat(text, first.start, contextChars)
		w.startChar = first.startChar - n
		w.end, n = advance(text, last.end, contextChars)
		w.endChar = last.endChar + n
		windows = append(windows, *w)
	}
	var cur window
	open := false
	for i := range hits {
		h := &hits[i]
		if !counted {
			h.startChar = charAt(h.start)
			h.endChar = charAt(h.end)
		}
		if open && h.startChar-contextChars <= hits[cur.last-1].endChar+contextChars {
			cur.last = i + 1
			if h.edits < hits[cur.best].edits {
				cur.best = i
			}
			continue
		}
		if open {
			closeWindow(&cur)
		}
		cur, open = window{first: i, last: i + 1, best: i}, true
	}
	if open {
		closeWindow(&cur)
	}
	if counted {
		return windows, total
	}
	return windows, charAt(len(text))
}

// lower folds ASCII letters.
var lower [256]byte

// wordBit gives each ASCII letter and digit its bit of a word's letter set
// (0–25 letters, 26–35 digits) and every other byte 0.
var wordBit [256]uint64

// isWord marks the ASCII letters and digits.
var isWord [256]bool

func init() {
	for c := range 256 {
		lower[c] = byte(c)
	}
	for c := 'A'; c <= 'Z'; c++ {
		lower[c] = byte(c + 32)
	}
	for c := 'a'; c <= 'z'; c++ {
		wordBit[c] = 1 << (c - 'a')
		wordBit[c-32] = 1 << (c - 'a')
	}
	for c := '0'; c <= '9'; c++ {
		wordBit[c] = 1 << (26 + c - '0')
	}
	for c := range 256 {
		isWord[c] = wordBit[c] != 0
	}
}

// fold maps a character to the one every character of its case-folding
// orbit maps to: ASCII letters to lower case, others to the smallest
// member of their orbit (lowered when that is an ASCII letter, so 'K'
// the Kelvin sign folds to 'k').
func fold(r rune) rune {
	if r < utf8.RuneSelf {
		return rune(lower[r])
	}
	if r < 0x10000 {
		return tables().fold[r]
	}
	return tools.FoldRune(r)
}

// findExact finds the non-overlapping case-insensitive occurrences of query.
func findExact(text, query string) []hit {
	if query == "" {
		return nil
	}
	ascii := true
	for i := range len(query) {
		if query[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return findASCII(text, query)
	}
	return findFolded(text, query)
}

// letterRank orders lower-case letters from most to least frequent in
// English, to anchor the search on the query's rarest byte.
const letterRank = "etaoinshrdlcumwfgypbvkjxqz"

func rarity(c byte) int {
	switch {
	case c == ' ':
		return 0
	case c >= 'a' && c <= 'z':
		return 1 + strings.IndexByte(letterRank, c)
	default:
		return 1 + len(letterRank)
	}
}

// findASCII looks for an ASCII query. It jumps with IndexByte (vectorised)
// between occurrences of the query's rarest byte, in either case, and
// compares the query around each.
func findASCII(text, query string) []hit {
	q := []byte(query)
	a := 0
	for i := range q {
		q[i] = lower[q[i]]
		if rarity(q[i]) > rarity(q[a]) {
			a = i
		}
	}
	lo, up := q[a], q[a]
	if lo >= 'a' && lo <= 'z' {
		up = lo - 32
	}
	next := func(c byte, from int) int {
		if from >= len(text) {
			return len(text)
		}
		if j := strings.IndexByte(text[from:], c); j >= 0 {
			return from + j
		}
		return len(text)
	}
	var hits []hit
	pos := a
	nl, nu := -1, -1
	for {
		if nl < pos {
			nl = next(lo, pos)
		}
		if nu < pos {
			nu = nl
			if up != lo {
				nu = next(up, pos)
			}
		}
		p := min(nl, nu)
		if p >= len(text) {
			return hits
		}
		s := p - a
		if s+len(q) <= len(text) && equalFoldASCII(text[s:s+len(q)], q) {
			hits = append(hits, hit{start: s, end: s + len(q)})
			pos = s + len(q) + a
		} else {
			pos = p + 1
		}
	}
}

func equalFoldASCII(s string, q []byte) bool {
	for i := range q {
		if lower[s[i]] != q[i] {
			return false
		}
	}
	return true
}

// findFolded looks for a query with non-ASCII characters, comparing folded
// characters one by one.
func findFolded(text, query string) []hit {
	var q []rune
	for _, r := range query {
		q = append(q, fold(r))
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
		if end, ok := matchFoldedAt(text, i, q); ok {
			hits = append(hits, hit{start: i, end: end})
			i = end
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return hits
}

func matchFoldedAt(text string, i int, q []rune) (int, bool) {
	for _, want := range q {
		if i >= len(text) {
			return 0, false
		}
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		if fold(r) != want {
			return 0, false
		}
		i += size
	}
	return i, true
}

// qword is one word of a fuzzy query.
type qword struct {
	runes []rune // folded
	mask  uint64 // letter set
	k     int    // edits allowed
	// The pattern of the bit-parallel distance, for words of up to 64
	// characters: for each folded character, the positions in runes where
	// it stands, one bit each. ASCII characters are looked up, others
	// found among the word's few.
	ascii [utf8.RuneSelf]uint64
	other []peq
}

type peq struct {
	r    rune
	bits uint64
}

// eq is the pattern of a folded character: where it stands in the word.
func (w *qword) eq(r rune) uint64 {
	if r < utf8.RuneSelf {
		return w.ascii[r]
	}
	for _, p := range w.other {
		if p.r == r {
			return p.bits
		}
	}
	return 0
}

// fuzzy is a compiled fuzzy query.
type fuzzy struct {
	words []qword
	// trigger is the query word tried on every text word; text words of
	// minLen to minLen+spread characters can match it.
	trigger, minLen, spread int
	// lead marks the first bytes of the characters that fold to one of
	// the trigger's: a text word that matches the trigger has at least
	// minLen such characters (an edit loses at most one).
	lead [256]bool
	// scratch: a text word folded, and rows of the edit distance table for
	// query words too long for one machine word
	word             []rune
	prev2, prev, row []int
}

// newFuzzy compiles query, or returns nil when it has no words or too many.
func newFuzzy(query string) *fuzzy {
	f := &fuzzy{}
	maxLen := 0
	forWords(query, func(start, end int, mask uint64) {
		var w qword
		digit := false
		for _, r := range query[start:end] {
			w.runes = append(w.runes, fold(r))
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
	for j := range f.words {
		w := &f.words[j]
		if n := len(w.runes) - w.k; n > f.minLen {
			f.trigger, f.minLen, f.spread = j, n, 2*w.k
		}
		if len(w.runes) > 64 {
			continue
		}
	runes:
		for i, r := range w.runes {
			if r < utf8.RuneSelf {
				w.ascii[r] |= 1 << i
				continue
			}
			for o := range w.other {
				if w.other[o].r == r {
					w.other[o].bits |= 1 << i
					continue runes
				}
			}
			w.other = append(w.other, peq{r, 1 << i})
		}
	}
	for _, t := range f.words[f.trigger].runes {
		for _, r := range tools.CaseVariants(t) {
			var b [utf8.UTFMax]byte
			utf8.EncodeRune(b[:], r)
			f.lead[b[0]] = true
		}
	}
	f.word = make([]rune, 0, maxLen+2)
	f.prev2, f.prev, f.row = make([]int, maxLen+1), make([]int, maxLen+1), make([]int, maxLen+1)
	return f
}

// runeBit puts a non-ASCII word character in one of bits 36–63 of a
// letter set; sharing bits only weakens the filter, never wrongs it.
func runeBit(r rune) uint64 {
	return foldedBit(fold(r))
}

// foldedBit is runeBit of a character already folded.
func foldedBit(f rune) uint64 {
	if f < utf8.RuneSelf {
		return wordBit[f]
	}
	return 1 << (36 + uint(f)%28)
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// forWords calls fn with each word of text, its bytes [start, end) and
// its letter set. It tokenizes queries; find applies the same rules
// faster.
func forWords(text string, fn func(start, end int, mask uint64)) {
	for i := 0; i < len(text); {
		start, end, _ := nextWord(text, i)
		if start == end {
			break
		}
		fn(start, end, wordMask(text[start:end]))
		i = end
	}
}

// nextWord finds the first word at or after byte i: its bytes [start, end)
// and how many of them are UTF-8 continuation bytes. start == end means
// there is none. Words are runs of letters, digits and combining marks.
func nextWord(text string, i int) (start, end, extra int) {
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
		r, size := decodeRune(text, i)
		if wordRune(r) {
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
		r, size := decodeRune(text, i)
		if !wordRune(r) {
			break
		}
		i += size
		extra += size - 1
	}
	return start, i, extra
}

// prevWord finds the last word that ends at or before byte i: its bytes
// [start, end) and its characters. start == end means there is none.
func prevWord(text string, i int) (start, end, chars int) {
	for i > 0 {
		if c := text[i-1]; c < utf8.RuneSelf {
			if isWord[c] {
				break
			}
			i--
			continue
		}
		r, size := utf8.DecodeLastRuneInString(text[:i])
		if wordRune(r) {
			break
		}
		i -= size
	}
	end = i
	for i > 0 {
		if c := text[i-1]; c < utf8.RuneSelf {
			if !isWord[c] {
				break
			}
			i--
			chars++
			continue
		}
		r, size := utf8.DecodeLastRuneInString(text[:i])
		if !wordRune(r) {
			break
		}
		i -= size
		chars++
	}
	return i, end, chars
}

// decodeRune is utf8.DecodeRuneInString(s[i:]) with the two- and
// three-byte characters of dense non-ASCII text decoded inline.
func decodeRune(s string, i int) (rune, int) {
	switch c := s[i]; {
	case c >= 0xC2 && c < 0xE0 && i+1 < len(s):
		if c1 := s[i+1]; c1&0xC0 == 0x80 {
			return rune(c&0x1F)<<6 | rune(c1&0x3F), 2
		}
	case c >= 0xE0 && c < 0xF0 && i+2 < len(s):
		c1, c2 := s[i+1], s[i+2]
		if c1&0xC0 == 0x80 && c2&0xC0 == 0x80 {
			r := rune(c&0x0F)<<12 | rune(c1&0x3F)<<6 | rune(c2&0x3F)
			if r >= 0x800 && (r < 0xD800 || r > 0xDFFF) {
				return r, 3
			}
		}
	}
	return utf8.DecodeRuneInString(s[i:])
}

// wordMask is the letter set of a word.
func wordMask(word string) uint64 {
	var mask uint64
	for i := 0; i < len(word); {
		if c := word[i]; c < utf8.RuneSelf {
			mask |= wordBit[c]
			i++
			continue
		}
		r, size := decodeRune(word, i)
		mask |= runeBit(r)
		i += size
	}
	return mask
}

// runeTables hold what fold and isWordRune give for every character of
// the Basic Multilingual Plane: computing them costs a binary search or
// several per character, which on dense non-ASCII text was most of a
// fuzzy search.
type runeTables struct {
	fold [0x10000]rune
	word [0x10000 / 64]uint64 // isWordRune, one bit each
}

// tables are built on first use (a few milliseconds), not at start-up.
var tables = sync.OnceValue(func() *runeTables {
	t := new(runeTables)
	for r := range rune(0x10000) {
		t.fold[r] = tools.FoldRune(r)
		if isWordRune(r) {
			t.word[r>>6] |= 1 << (r & 63)
		}
	}
	return t
})

// wordRune is isWordRune, looked up in the Basic Multilingual Plane.
func wordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return isWord[r]
	}
	if r < 0x10000 {
		return tables().word[r>>6]>>(r&63)&1 != 0
	}
	return isWordRune(r)
}

// find returns the non-overlapping runs of text words that match the
// query's words in order, each with its total edits.
//
// Tokenizing byte by byte costs two mispredicted branches per word, which
// is most of the time on prose, so words are found 64 bytes at a time: a
// bitmap of the bytes that can be in a word (ASCII letters and digits,
// and any non-ASCII byte), whose edges are the word boundaries. Only one
// query word, the trigger, is tried on the text's words, and most of them
// are dismissed by their length alone: a run of bytes shorter than the
// shortest match is skipped whole, and a run with non-ASCII bytes is split
// by the exact rules only when it is long enough. The rest are dismissed
// mostly by their letter sets; only the few left get an edit distance,
// bit-parallel. When the trigger matches, the words around it are read
// and tried against the rest of the query.
func (f *fuzzy) find(text string) ([]hit, int) {
	s := &scanner{f: f, text: text, run: make([]slot, len(f.words)), tab: tables()}
	minLen := f.minLen
	start, spanFrom, chars := -1, 0, 0
	var na bool
	for base := 0; base < len(text); base += 64 {
		block := text[base:min(base+64, len(text))]
		w, nonASCII, cont := classify(block)
		s.base = base
		var carry uint64
		if start >= 0 {
			carry = 1
		}
		edges := w ^ (w<<1 | carry) // first byte of each run and first byte after it
		for edges != 0 {
			b := bits.TrailingZeros64(edges)
			edges &= edges - 1
			if w>>b&1 != 0 {
				start, spanFrom, na, chars = base+b, b, false, 0
				continue
			}
			// A word has no more characters than bytes, nor than the
			// span has.
			if base+b-start >= minLen {
				in := between(spanFrom, b)
				s.span(start, base+b, na || nonASCII&in != 0, chars+bits.OnesCount64(in&^cont))
			}
			start = -1
		}
		if start >= 0 {
			in := between(spanFrom, 64)
			na = na || nonASCII&in != 0
			chars += bits.OnesCount64(in &^ cont)
			spanFrom = 0
		}
		s.baseChars += len(block) - bits.OnesCount64(cont)
	}
	s.base = len(text)
	if start >= 0 && len(text)-start >= minLen {
		s.span(start, len(text), na, chars)
	}
	return s.hits, s.baseChars
}

// scanner feeds the text's words to a fuzzy query.
type scanner struct {
	f    *fuzzy
	text string
	tab  *runeTables
	run  []slot // the words of a run being tried, one per query word
	free int    // the first byte a new hit may start at
	hits []hit
	// base is the byte the scan has reached, a block's first, and
	// baseChars the characters before it: a hit's character offsets are
	// counted from there, not from the start.
	base, baseChars int
}

// charAt is the character offset of byte i, which starts a character.
func (s *scanner) charAt(i int) int {
	if i >= s.base {
		return s.baseChars + countChars(s.text[s.base:i])
	}
	return s.baseChars - countChars(s.text[i:s.base])
}

type slot struct {
	start, end, chars int
}

// span takes a run of word bytes of so many characters: one word, or
// with non-ASCII bytes, possibly several or none.
func (s *scanner) span(start, end int, nonASCII bool, chars int) {
	f := s.f
	if uint(chars-f.minLen) <= uint(f.spread) && !nonASCII {
		s.candidate(start, end, chars)
		return
	}
	if chars < f.minLen || !nonASCII {
		return
	}
	// Too few characters that could be the trigger's: no word here
	// matches it. In dense text of another script, most runs end here.
	text := s.text
	lead := 0
	for i := start; i < end && lead < f.minLen; i++ {
		if f.lead[text[i]] {
			lead++
		}
	}
	if lead < f.minLen {
		return
	}
	// Split by the exact rules. The text is valid UTF-8: a byte below
	// 0xE0 that is not ASCII leads a two-byte character, one below 0xF0
	// a three-byte one.
	word := &s.tab.word
	ws, n := -1, 0
	for i := start; i < end; {
		at, c := i, text[i]
		var in bool
		switch {
		case c < utf8.RuneSelf:
			in = isWord[c]
			i++
		case c < 0xE0 && i+1 < end:
			r := rune(c&0x1F)<<6 | rune(text[i+1]&0x3F)
			in = word[r>>6]>>(r&63)&1 != 0
			i += 2
		case c < 0xF0 && i+2 < end:
			r := rune(c&0x0F)<<12 | rune(text[i+1]&0x3F)<<6 | rune(text[i+2]&0x3F)
			in = word[r>>6]>>(r&63)&1 != 0
			i += 3
		default:
			r, size := decodeRune(text, i)
			if r < 0x10000 {
				in = word[r>>6]>>(r&63)&1 != 0
			} else {
				in = isWordRune(r)
			}
			i += size
		}
		if in {
			if ws < 0 {
				ws, n = at, 0
			}
			n++
			continue
		}
		if ws >= 0 && uint(n-f.minLen) <= uint(f.spread) {
			s.candidate(ws, at, n)
		}
		ws = -1
	}
	if ws >= 0 && uint(n-f.minLen) <= uint(f.spread) {
		s.candidate(ws, end, n)
	}
}

// candidate tries a text word of the trigger's length on the trigger, and
// when it matches, the words around it on the rest of the query. A run
// that overlaps the last hit is not one.
func (s *scanner) candidate(start, end, chars int) {
	f := s.f
	if start < s.free {
		return
	}
	if _, ok := f.match(s.text[start:end], chars, f.trigger); !ok {
		return
	}
	run := s.run
	run[f.trigger] = slot{start, end, chars}
	for j, pos := f.trigger-1, start; j >= 0; j-- {
		ws, we, n := prevWord(s.text, pos)
		if ws == we {
			return
		}
		run[j], pos = slot{ws, we, n}, ws
	}
	if run[0].start < s.free {
		return
	}
	for j, pos := f.trigger+1, end; j < len(run); j++ {
		ws, we, extra := nextWord(s.text, pos)
		if ws == we {
			return
		}
		run[j], pos = slot{ws, we, we - ws - extra}, we
	}
	edits := 0
	for j, w := range run {
		d, ok := f.match(s.text[w.start:w.end], w.chars, j)
		if !ok {
			return
		}
		edits += d
	}
	first, last := run[0].start, run[len(run)-1].end
	s.hits = append(s.hits, hit{start: first, end: last, edits: edits, startChar: s.charAt(first), endChar: s.charAt(last)})
	s.free = last
}

// match reports whether a text word of chars characters matches query
// word j, and with how many edits. Length and letter set rule out most
// words before the edit distance.
func (f *fuzzy) match(word string, chars, j int) (int, bool) {
	w := &f.words[j]
	if d := chars - len(w.runes); d > w.k || -d > w.k {
		return 0, false
	}
	var mask uint64
	a := f.word[:0]
	if chars == len(word) {
		for i := range len(word) {
			c := word[i]
			mask |= wordBit[c]
			a = append(a, rune(lower[c]))
		}
	} else {
		tab := &tables().fold
		for i := 0; i < len(word); {
			r, size := rune(word[i]), 1
			switch {
			case r < utf8.RuneSelf:
				r = rune(lower[r])
			default:
				r, size = decodeRune(word, i)
				if r < 0x10000 {
					r = tab[r]
				} else {
					r = tools.FoldRune(r)
				}
			}
			mask |= foldedBit(r)
			if bits.OnesCount64(mask&^w.mask) > w.k {
				// Too many letters the query word lacks: decoding
				// and folding the rest would not change that.
				return 0, false
			}
			a = append(a, r)
			i += size
		}
	}
	f.word = a
	if bits.OnesCount64(w.mask&^mask) > w.k || bits.OnesCount64(mask&^w.mask) > w.k {
		return 0, false
	}
	var d int
	if len(w.runes) <= 64 {
		d = min(w.osa(a), w.k+1)
	} else {
		d = f.distance(a, w.runes, w.k)
	}
	return d, d <= w.k
}

// osa is the optimal string alignment distance between a and the word
// (an edit inserts, deletes or replaces a character, or swaps two
// neighbours), for words of up to 64 characters: Hyyrö's bit-vector
// algorithm (2003), Myers' (1999) extended with transpositions. A column
// of the edit distance table is one machine word of vertical deltas, and
// a text character costs a dozen operations whatever the word's length.
func (w *qword) osa(a []rune) int {
	m := len(w.runes)
	top := uint64(1) << (m - 1)
	vp, vn, d0, prevEq := ^uint64(0), uint64(0), uint64(0), uint64(0)
	dist := m
	for _, r := range a {
		eq := w.eq(r)
		tr := (^d0 & eq) << 1 & prevEq
		d0 = ((eq & vp) + vp) ^ vp | eq | vn | tr
		hp := vn | ^(d0 | vp)
		hn := d0 & vp
		if hp&top != 0 {
			dist++
		}
		if hn&top != 0 {
			dist--
		}
		hp = hp<<1 | 1
		hn <<= 1
		vp = hn | ^(d0 | hp)
		vn = hp & d0
		prevEq = eq
	}
	return dist
}

// distance is the optimal string alignment distance between a and b (an
// edit inserts, deletes or replaces a character, or swaps two neighbours),
// or k+1 once it must exceed k. It takes query words too long for osa.
func (f *fuzzy) distance(a, b []rune, k int) int {
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

// between sets bits [from, to) of a uint64.
func between(from, to int) uint64 {
	hi := ^uint64(0)
	if to < 64 {
		hi = 1<<to - 1
	}
	return hi &^ (1<<from - 1)
}

// classify maps up to 64 bytes to three bitmaps: bytes that can be in a
// word (ASCII letters and digits, non-ASCII bytes), non-ASCII bytes, and
// UTF-8 continuation bytes.
// Eight bytes at a time, without branches.
func classify(b string) (word, nonASCII, cont uint64) {
	if len(b) < 64 {
		for j := range len(b) {
			if c := b[j]; isWord[c] || c >= utf8.RuneSelf {
				word |= 1 << j
			}
			if b[j] >= utf8.RuneSelf {
				nonASCII |= 1 << j
			}
			if b[j]&0xC0 == 0x80 {
				cont |= 1 << j
			}
		}
		return word, nonASCII, cont
	}
	for k := range 8 {
		x := le64(b[k*8:])
		hi := x & msb
		x7 := x &^ msb // no byte can carry into the next below
		y := x7 | lsb*0x20
		letters := (y + lsb*(0x80-'a')) &^ (y + lsb*(0x80-'z'-1))
		digits := (x7 + lsb*(0x80-'0')) &^ (x7 + lsb*(0x80-'9'-1))
		word |= pack((letters|digits)&msb|hi) << (8 * k)
		nonASCII |= pack(hi) << (8 * k)
		cont |= pack(hi&^(x<<1)) << (8 * k)
	}
	return word, nonASCII, cont
}

// pack gathers the top bits of eight bytes into eight bits, byte 0 lowest.
func pack(x uint64) uint64 {
	return (x >> 7 * 0x0102040810204080) >> 56
}
