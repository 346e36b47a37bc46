package result

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// refSearch is Search with the reference fuzzy search and case folding.
func refSearch(text, query string, match Match, contextChars, maxChars int) SearchResult {
	if !utf8.ValidString(text) {
		text = sanitize(text)
	}
	return excerpts(text, refHits(text, query, match), -1, contextChars, maxChars)
}

func refHits(text, query string, match Match) []hit {
	if match == Fuzzy {
		if q := refNewFuzzy(query); q != nil {
			return q.find(text)
		}
	}
	if query == "" {
		return nil
	}
	for i := range len(query) {
		if query[i] >= utf8.RuneSelf {
			return refFindFolded(text, query)
		}
	}
	return findASCII(text, query)
}

// newHits is the hits Search finds, without the character offsets the
// fuzzy search counts as it goes (the reference leaves them to merge;
// TestFuzzyMatchesReference compares them through Search's result).
func newHits(text, query string, match Match) []hit {
	if match == Fuzzy {
		if q := newFuzzy(query); q != nil {
			hits, _ := q.find(text)
			for i := range hits {
				hits[i].startChar, hits[i].endChar = 0, 0
			}
			return hits
		}
	}
	return findExact(text, query)
}

// alphabets the random texts draw their words from. Each is a set of
// characters; words mix them as their script does.
var alphabets = map[string][]string{
	"ascii":    strings.Split("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", ""),
	"small":    strings.Split("abcAB", ""), // near misses everywhere
	"cyrillic": strings.Split("абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯ", ""),
	"greek":    strings.Split("αβγδεζηθικλμνξοπρσςτυφχψωΑΒΓΔΕΖΗΘΣΩάέήίόύώΐϐϑϕ", ""),
	"cjk":      strings.Split("报销截止日期费用预算审批発票締切経費精算承認", ""),
	"accented": strings.Split("éèêëàâäôöûüçñøåÉÈÀÇÑØÅßẞſıİœŒæÆ", ""),
	"folding": {
		"k", "K", "\u212A", "s", "S", "\u017F", "å", "Å", "\u212B", "ω", "Ω", "\u2126", "σ", "ς", "Σ",
		"µ", "μ", "Μ", "\u0301", "\u0303", "\u0308", "e\u0301", "n\u0303", "Ａ", "ａ", "\U00010400", "\U00010428",
		"٣", "٤", "a", "e", "n",
	},
}

// separators between words, some of them non-ASCII, one an invalid byte.
var separators = []string{" ", " ", " ", ", ", ". ", "\n", "-", " — ", "\u00a0", "«", "»", "。", "😀", "\t", "'", "\xff", "_", "’"}

func randomWord(r *rand.Rand, alphabet []string) string {
	var b strings.Builder
	for range 1 + r.IntN(12) {
		b.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// randomProse draws words from one or two alphabets.
func randomProse(r *rand.Rand, words int) string {
	keys := []string{"ascii", "small", "cyrillic", "greek", "cjk", "accented", "folding"}
	a := alphabets[keys[r.IntN(len(keys))]]
	b := alphabets[keys[r.IntN(len(keys))]]
	var sb strings.Builder
	// Sometimes a few words over and over, so that runs overlap.
	var few []string
	if r.IntN(3) == 0 {
		for range 1 + r.IntN(4) {
			few = append(few, randomWord(r, a))
		}
	}
	for range words {
		if few != nil {
			sb.WriteString(typo(r, few[r.IntN(len(few))], r.IntN(2)))
		} else if r.IntN(3) == 0 {
			sb.WriteString(randomWord(r, b))
		} else {
			sb.WriteString(randomWord(r, a))
		}
		sb.WriteString(separators[r.IntN(len(separators))])
	}
	return sb.String()
}

// typo makes up to n random edits to s, character by character, and
// sometimes changes case.
func typo(r *rand.Rand, s string, n int) string {
	rs := []rune(s)
	for range r.IntN(n + 1) {
		if len(rs) == 0 {
			break
		}
		i := r.IntN(len(rs))
		switch r.IntN(5) {
		case 0:
			rs = append(rs[:i], rs[i+1:]...)
		case 1:
			rs = append(rs[:i], append([]rune{rs[r.IntN(len(rs))]}, rs[i:]...)...)
		case 2:
			rs[i] = rs[r.IntN(len(rs))]
		case 3:
			if i+1 < len(rs) {
				rs[i], rs[i+1] = rs[i+1], rs[i]
			}
		case 4:
			rs[i] = unicode.SimpleFold(rs[i])
		}
	}
	return string(rs)
}

// queryFrom takes one to four words in a row from text, misspelt, or
// sometimes makes a query up.
func queryFrom(r *rand.Rand, text string) string {
	var words []string
	forWords(text, func(start, end int, _ uint64) { words = append(words, text[start:end]) })
	if len(words) == 0 || r.IntN(10) == 0 {
		return randomProse(r, 1+r.IntN(3))
	}
	i := r.IntN(len(words))
	n := min(1+r.IntN(4), len(words)-i)
	q := make([]string, n)
	for j := range n {
		q[j] = typo(r, words[i+j], 3)
	}
	return strings.Join(q, separators[r.IntN(3)])
}

// TestFuzzyMatchesReference holds the fuzzy search to the one it
// replaced, on random texts and queries in many scripts: the same hits,
// the same result.
func TestFuzzyMatchesReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(18, 200))
	n := 1500
	if testing.Short() {
		n = 300
	}
	found := 0
	for i := range n {
		text := randomProse(r, 1+r.IntN(200))
		clean := sanitize(text)
		for range 5 {
			query := queryFrom(r, clean)
			for _, m := range []Match{Fuzzy, Exact} {
				want := refHits(clean, query, m)
				require.Equal(t, want, newHits(clean, query, m), "case %d: %q in %q (%s)", i, query, text, m)
				found += len(want)
				ctx, budget := r.IntN(40), r.IntN(300)
				require.Equal(t, refSearch(text, query, m, ctx, budget), Search(text, query, m, ctx, budget), "case %d: %q in %q (%s)", i, query, text, m)
			}
		}
	}
	require.Greater(t, found, n, "the queries find things")
}

func TestFuzzyMatchesReferenceOnBenchTexts(t *testing.T) {
	t.Parallel()
	ascii, _ := benchText(1 << 20)
	dense, _ := nonASCIIBenchText(1 << 20)
	for _, text := range []string{ascii, dense} {
		for _, q := range []string{"reimbursment deadline", "возмещние расходов", "remboursment echeance", "the of", "Größe straße", "kelvin", "报销截止", "расход отчёт бюджет"} {
			require.Equal(t, refHits(text, q, Fuzzy), newHits(text, q, Fuzzy), q)
		}
	}
}

// TestOSA holds the bit-parallel distance to the table on every pair of
// short words over a small alphabet, and on random longer ones.
func TestOSA(t *testing.T) {
	t.Parallel()
	var words []string
	var grow func(string)
	grow = func(s string) {
		words = append(words, s)
		if len(s) < 5 {
			for _, c := range []string{"a", "b", "é"} {
				grow(s + c)
			}
		}
	}
	grow("")
	f := newFuzzy(strings.Repeat("x", 70))
	check := func(a, b string) {
		q := newFuzzy(b)
		if q == nil {
			return
		}
		w := &q.words[0]
		ra := []rune(a)
		for _, k := range []int{0, 1, 2, len(ra) + len(w.runes)} {
			require.Equal(t, f.distance(ra, w.runes, k), min(w.osa(ra), k+1), "%q %q %d", a, b, k)
		}
	}
	for _, a := range words {
		for _, b := range words {
			check(a, b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := randomWord(r, alphabets["small"])
		for len([]rune(b)) < 64 && r.IntN(3) > 0 {
			b += randomWord(r, alphabets["small"])
		}
		b = string([]rune(b)[:min(64, len([]rune(b)))])
		check(typo(r, b, 6), b)
	}
}

// TestLongQueryWord uses the table for query words longer than a machine
// word.
func TestLongQueryWord(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("ab", 40)
	text := "x " + long[:20] + "zz" + long[22:] + " y"
	require.Equal(t, refSearch(text, long, Fuzzy, 5, 100), Search(text, long, Fuzzy, 5, 100))
	require.Equal(t, 1, Search(text, long, Fuzzy, 5, 100).Hits)
}

func TestRuneTables(t *testing.T) {
	t.Parallel()
	tab := tables()
	for r := range rune(0x10000) {
		require.Equal(t, refFold(r), tab.fold[r], "%U", r)
		require.Equal(t, refIsWordRune(r), wordRune(r), "%U", r)
	}
	for _, r := range []rune{0x10400, 0x10428, 0x1F600, 0x20000, unicode.MaxRune} {
		require.Equal(t, refFold(r), fold(r), "%U", r)
		require.Equal(t, refIsWordRune(r), wordRune(r), "%U", r)
	}
}

func TestDecodeRune(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		b := make([]byte, 1+r.IntN(4))
		for i := range b {
			b[i] = byte(0x80 + r.IntN(0x80))
			if r.IntN(4) == 0 {
				b[i] = byte(r.IntN(256))
			}
		}
		s := string(b)
		wr, ws := utf8.DecodeRuneInString(s)
		gr, gs := decodeRune(s, 0)
		require.Equal(t, []any{wr, ws}, []any{gr, gs}, "%q", s)
	}
}

// FuzzFuzzyMatchesReference is TestFuzzyMatchesReference on any input.
func FuzzFuzzyMatchesReference(f *testing.F) {
	f.Add("the Reimbursement deadline is near; reimbursment dedline", "reimbursement deadline", uint8(20), uint16(100))
	f.Add("Возмещение расходов — возмещене расхдов", "возмещние расходов", uint8(3), uint16(10))
	f.Add("5 \u212Aelvin, cafe\u0301 Straße", "kelvin cafés strasse", uint8(0), uint16(0))
	f.Add("x\xffy\xfe deadline 报销截止日期", "DEADLINE 报销截止", uint8(1), uint16(0))
	f.Fuzz(func(t *testing.T, text, query string, context uint8, maxChars uint16) {
		clean := sanitize(text)
		require.Equal(t, refHits(clean, query, Fuzzy), newHits(clean, query, Fuzzy))
		require.Equal(t, refSearch(text, query, Fuzzy, int(context), int(maxChars)), Search(text, query, Fuzzy, int(context), int(maxChars)))
	})
}

// BenchmarkFuzzyBeforeAfter runs the reference and the fast search over
// the same 10 MB texts, for a before-and-after under the same load.
func BenchmarkFuzzyBeforeAfter(b *testing.B) {
	ascii, _ := benchText(10 << 20)
	dense, _ := nonASCIIBenchText(10 << 20)
	cases := []struct{ name, text, query string }{
		{"ascii", ascii, "reimbursment deadline"},
		{"dense", dense, "возмещние расходов"},
		{"latin-in-dense", dense, "remboursment echeance"},
	}
	for _, c := range cases {
		for _, impl := range []struct {
			name   string
			search func(text, query string, match Match, contextChars, maxChars int) SearchResult
		}{{"before", refSearch}, {"after", Search}} {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				cpuLoop(b, len(c.text), func() {
					impl.search(c.text, c.query, Fuzzy, DefaultContextChars, DefaultMaxChars)
				})
			})
		}
	}
}
