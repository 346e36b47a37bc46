package result

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// found is an excerpt reduced to what a table can state.
type found struct {
	offset int
	text   string
	edits  int
	hits   int
}

func summarize(res SearchResult) []found {
	var out []found
	for _, e := range res.Excerpts {
		out = append(out, found{e.Offset, e.Text, e.Edits, e.Hits})
	}
	return out
}

func TestSearchExact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		text     string
		query    string
		context  int
		want     []found
		wantHits int
	}{
		{
			name: "ignores case", text: "The Deadline is Friday; the deadline moved.", query: "DEADLINE", context: 4,
			want:     []found{{0, "The Deadline is ", 0, 1}, {24, "the deadline mov", 0, 1}},
			wantHits: 2,
		},
		{
			name: "phrase with punctuation", text: "see: reimbursement deadline, then pay", query: "reimbursement deadline,", context: 0,
			want:     []found{{5, "reimbursement deadline,", 0, 1}},
			wantHits: 1,
		},
		{
			name: "non-overlapping occurrences, touching windows merged", text: "aaaaa", query: "aa", context: 0,
			want:     []found{{0, "aaaa", 0, 2}},
			wantHits: 2,
		},
		{
			name: "non-ASCII query folds case", text: "Un ÉTÉ chaud, un été froid", query: "été", context: 1,
			want:     []found{{2, " ÉTÉ ", 0, 1}, {16, " été ", 0, 1}},
			wantHits: 2,
		},
		{
			name: "Kelvin sign folds to k", text: "5 \u212Aelvin", query: "kelvin", context: 0,
			want: nil, wantHits: 0, // ASCII queries fold ASCII only
		},
		{name: "no match", text: "nothing to see", query: "deadline", context: 10, want: nil, wantHits: 0},
		{name: "empty query", text: "anything", query: "", context: 10, want: nil, wantHits: 0},
		{
			name: "exact mode takes typos literally", text: "reimbursement deadline", query: "reimbursment", context: 5,
			want: nil, wantHits: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := Search(tt.text, tt.query, Exact, tt.context, 1000)
			require.Equal(t, tt.want, summarize(res))
			require.Equal(t, tt.wantHits, res.Hits)
			require.Equal(t, utf8.RuneCountInString(tt.text), res.Total)
		})
	}
}

func TestSearchFuzzy(t *testing.T) {
	t.Parallel()
	const text = "Claims: the Reimbursement deadline is 30 June 2024. Late claims wait."
	tests := []struct {
		name      string
		query     string
		wantText  string
		wantEdits int
	}{
		{"exact words", "reimbursement deadline", "Reimbursement deadline", 0},
		{"one typo, deletion", "reimbursment deadline", "Reimbursement deadline", 1},
		{"one typo, swap", "reimbursemnet deadline", "Reimbursement deadline", 1},
		{"two typos in a long word", "reimbrsemnet deadline", "Reimbursement deadline", 2},
		{"a typo in each word", "reimbursment dedline", "Reimbursement deadline", 2},
		{"one typo in a mid-length word", "dedline", "deadline", 1},
		{"separators do not matter", "deadline, is", "deadline is", 0},
		{"short words exact", "late claims", "Late claims", 0},
		{"numbers exact", "june 2024", "June 2024", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := Search(text, tt.query, Fuzzy, 0, 1000)
			require.Equal(t, 1, res.Hits)
			require.Len(t, res.Excerpts, 1)
			require.Equal(t, tt.wantText, res.Excerpts[0].Text)
			require.Equal(t, tt.wantEdits, res.Excerpts[0].Edits)
		})
	}
}

func TestSearchFuzzyRefuses(t *testing.T) {
	t.Parallel()
	const text = "Claims: the Reimbursement deadline is 30 June 2024. Late claims wait."
	tests := []struct {
		name  string
		query string
	}{
		{"three typos in a long word", "rimbrsemnet deadline"},
		{"two typos in a mid-length word", "dedlne"},
		{"a typo in a short word", "tha reimbursement"},
		{"a different number", "june 2023"},
		{"words out of order", "deadline reimbursement"},
		{"a word missing between", "the deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := Search(text, tt.query, Fuzzy, 0, 1000)
			require.Zero(t, res.Hits)
			require.Empty(t, res.Excerpts)
		})
	}
}

func TestSearchFuzzyNonASCII(t *testing.T) {
	t.Parallel()
	text := "Le résumé — Naïve approach—deadline: « reimbursement »"
	tests := []struct {
		query     string
		wantText  string
		wantEdits int
	}{
		{"naive approach", "Naïve approach", 1},
		{"approach deadline", "approach—deadline", 0},
		{"deadline reimbursement", "deadline: « reimbursement", 0},
		{"RÉSUMÉ", "résumé", 0},
	}
	for _, tt := range tests {
		res := Search(text, tt.query, Fuzzy, 0, 1000)
		require.Len(t, res.Excerpts, 1, tt.query)
		require.Equal(t, tt.wantText, res.Excerpts[0].Text)
		require.Equal(t, tt.wantEdits, res.Excerpts[0].Edits)
	}
}

func TestSearchFuzzyRepeatedWordsDoNotOverlap(t *testing.T) {
	t.Parallel()
	res := Search("deadline deadline deadline deadline deadline", "deadline deadline", Fuzzy, 0, 1000)
	require.Equal(t, 2, res.Hits)
}

func TestSearchFuzzyWithoutWordsIsExact(t *testing.T) {
	t.Parallel()
	res := Search("a -- b -- c", "--", Fuzzy, 0, 100)
	require.Equal(t, 2, res.Hits)
}

func TestSearchRanksFewerEditsFirst(t *testing.T) {
	t.Parallel()
	filler := strings.Repeat("lorem ipsum dolor ", 30)
	text := "reimbursmant dedline " + filler + "reimbursement deadline " + filler + "reimbursement dedline " + filler + "reimbursement deadline"
	res := Search(text, "reimbursement deadline", Fuzzy, 10, 10000)
	require.Equal(t, 4, res.Hits)
	var edits []int
	var offsets []int
	for _, e := range res.Excerpts {
		edits = append(edits, e.Edits)
		offsets = append(offsets, e.MatchOffset)
	}
	require.Equal(t, []int{0, 0, 1, 3}, edits)
	require.Less(t, offsets[0], offsets[1], "equal edits rank by position")
}

func TestSearchMergesOverlappingWindows(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("x", 100) + " alpha beta alpha " + strings.Repeat("y", 100)
	res := Search(text, "alpha", Exact, 10, 1000)
	require.Equal(t, 2, res.Hits)
	require.Equal(t, []found{{91, strings.Repeat("x", 9) + " alpha beta alpha " + strings.Repeat("y", 9), 0, 2}}, summarize(res))
	require.Equal(t, 2, res.Shown)
}

func TestSearchContextAtTextEdges(t *testing.T) {
	t.Parallel()
	text := "alpha " + strings.Repeat("z", 500) + " omega"
	tests := []struct {
		query string
		want  found
	}{
		{"alpha", found{0, "alpha " + strings.Repeat("z", 19), 0, 1}},
		{"omega", found{487, strings.Repeat("z", 19) + " omega", 0, 1}},
	}
	for _, tt := range tests {
		res := Search(text, tt.query, Exact, 20, 1000)
		require.Equal(t, []found{tt.want}, summarize(res))
	}
}

func TestSearchBudget(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 50 {
		b.WriteString(strings.Repeat("filler text ", 40))
		if i%10 == 0 {
			b.WriteString("reimbursment deadline ") // one typo
		} else {
			b.WriteString("reimbursement deadline ")
		}
	}
	text := b.String()
	res := Search(text, "reimbursement deadline", Fuzzy, 200, MinMaxChars)
	require.Equal(t, 50, res.Hits)
	total := 0
	for _, e := range res.Excerpts {
		total += utf8.RuneCountInString(e.Text)
		require.Zero(t, e.Edits, "exact matches come first")
	}
	require.LessOrEqual(t, total, MinMaxChars)
	require.Greater(t, total, MinMaxChars-450, "the budget is used")
	require.Equal(t, len(res.Excerpts), res.Shown)
	require.Less(t, res.Shown, res.Hits)
}

func TestSearchCutsAWindowLargerThanTheBudget(t *testing.T) {
	t.Parallel()
	// Matches every few characters merge into one window of 12,000.
	text := strings.Repeat("foo bar baz ", 1000)
	res := Search(text, "bar", Exact, 200, 1024)
	require.Equal(t, 1000, res.Hits)
	require.Len(t, res.Excerpts, 1)
	e := res.Excerpts[0]
	require.Equal(t, 1024, utf8.RuneCountInString(e.Text))
	require.Equal(t, 4, e.MatchOffset)
	require.Equal(t, 0, e.Offset)
	require.Equal(t, text[:1024], e.Text)
	require.Equal(t, 85, e.Hits) // "bar" at 4, 16, …, 1012 (1015 <= 1024)
	require.Equal(t, 85, res.Shown)
}

func TestSearchOffsetsAreCharacters(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("café ✓ 😀 ", 300) + "Reimbursement Deadline" + strings.Repeat(" naïve", 100)
	for _, m := range []Match{Exact, Fuzzy} {
		res := Search(text, "reimbursement deadline", m, 30, 2000)
		require.Len(t, res.Excerpts, 1)
		e := res.Excerpts[0]
		require.Equal(t, 2700, e.MatchOffset)
		require.Equal(t, Window(text, e.Offset, utf8.RuneCountInString(e.Text)).Text, e.Text)
		require.Equal(t, "Reimbursement Deadline", Window(text, e.MatchOffset, 22).Text)
		require.Equal(t, 82, utf8.RuneCountInString(e.Text))
	}
}

func TestDistance(t *testing.T) {
	t.Parallel()
	f := newFuzzy("reimbursement")
	tests := []struct {
		a, b string
		k    int
		want int
	}{
		{"deadline", "deadline", 2, 0},
		{"deadlien", "deadline", 2, 1},
		{"dedline", "deadline", 2, 1},
		{"deadlines", "deadline", 2, 1},
		{"dxadlixe", "deadline", 2, 2},
		{"xxxxline", "deadline", 2, 3},
		{"ab", "deadline", 2, 3},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, f.distance([]rune(tt.a), []rune(tt.b), tt.k), "%s/%s", tt.a, tt.b)
	}
}

var vocabulary = strings.Fields(`the of and to in is was for that with as on by at from his her
	which this be are have had not but were they all their there one been has an more who
	would when will can if no about out them some what up into only its other could time
	these two may then do first any my now such like our over man me even most made after
	also did many before must through back years where much your way well down should
	because each just those people how too little state good very make world still own see
	men work long get here between both life being under never day same another know while
	last might us great old year off come since against go came right used take three
	claims policy payment travel expenses employee manager approval receipt invoice budget
	quarter finance department submitted reviewed process request account balance report`)

// benchText is about size bytes of English-ish prose with "reimbursement
// deadline" a few dozen times, a third of them misspelt.
func benchText(size int) (string, int) {
	r := rand.New(rand.NewPCG(42, 7))
	var b strings.Builder
	b.Grow(size + 100)
	planted := 0
	typos := []string{"reimbursment deadline", "reimbursement dedline", "Reimbursemnet deadline"}
	for b.Len() < size {
		switch n := r.IntN(20000); {
		case n < 3:
			b.WriteString("Reimbursement deadline")
			planted++
		case n < 5:
			b.WriteString(typos[r.IntN(len(typos))])
			planted++
		default:
			w := vocabulary[r.IntN(len(vocabulary))]
			if r.IntN(10) == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
		}
		switch r.IntN(15) {
		case 0:
			b.WriteString(". ")
		case 1:
			b.WriteString(", ")
		case 2:
			if r.IntN(4) == 0 {
				b.WriteString(".\n\n")
				break
			}
			b.WriteByte(' ')
		default:
			b.WriteByte(' ')
		}
	}
	return b.String(), planted
}

func TestBenchTextFindsEveryPlantedPhrase(t *testing.T) {
	t.Parallel()
	text, planted := benchText(2 << 20)
	require.Positive(t, planted)
	res := Search(text, "reimbursement deadline", Fuzzy, DefaultContextChars, DefaultMaxChars)
	require.Equal(t, planted, res.Hits)
	exact := Search(text, "reimbursement deadline", Exact, DefaultContextChars, DefaultMaxChars)
	require.Less(t, exact.Hits, planted)
	require.Positive(t, exact.Hits)
}

func BenchmarkSearchFuzzy10MB(b *testing.B) {
	text, planted := benchText(10 << 20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if res := Search(text, "reimbursment deadline", Fuzzy, DefaultContextChars, DefaultMaxChars); res.Hits != planted {
			b.Fatalf("found %d of %d", res.Hits, planted)
		}
	}
}

func BenchmarkSearchExact10MB(b *testing.B) {
	text, _ := benchText(10 << 20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if res := Search(text, "reimbursement deadline", Exact, DefaultContextChars, DefaultMaxChars); res.Hits == 0 {
			b.Fatal("no hits")
		}
	}
}

func BenchmarkWindow10MB(b *testing.B) {
	text, _ := benchText(10 << 20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Window(text, 9_000_000, DefaultMaxChars)
	}
}

func FuzzSearch(f *testing.F) {
	f.Add("the Reimbursement deadline is near; reimbursment dedline", "reimbursement deadline", true, uint8(20), uint16(100))
	f.Add("café ✓ 😀 naïve approach — done", "naive", true, uint8(3), uint16(10))
	f.Add(strings.Repeat("aa b ", 100), "a", false, uint8(5), uint16(50))
	f.Add("x\xffy\xfe deadline", "DEADLINE", false, uint8(1), uint16(0))
	f.Fuzz(func(t *testing.T, text, query string, fuzzy bool, context uint8, maxChars uint16) {
		match := Exact
		if fuzzy {
			match = Fuzzy
		}
		res := Search(text, query, match, int(context), int(maxChars))
		budget := int(maxChars)
		if budget == 0 {
			budget = DefaultMaxChars
		}
		require.Equal(t, utf8.RuneCountInString(text), res.Total)
		used, prevEdits := 0, 0
		for _, e := range res.Excerpts {
			n := utf8.RuneCountInString(e.Text)
			used += n
			require.Equal(t, Window(text, e.Offset, n).Text, e.Text)
			require.GreaterOrEqual(t, e.MatchOffset, e.Offset)
			require.Positive(t, e.Hits)
			require.GreaterOrEqual(t, e.Edits, prevEdits)
			prevEdits = e.Edits
		}
		require.LessOrEqual(t, used, budget)
		require.LessOrEqual(t, res.Shown, res.Hits)
	})
}

// Words of dense non-ASCII prose: Cyrillic, Greek, accented Latin (with a
// Kelvin sign and combining marks), and CJK, which runs without spaces.
var (
	cyrillic = strings.Fields(`и в не на что он с как это по но они к у же вы за бы так
		все она мы только было его ещё когда уже для вот да нет если или ни быть был
		него до вас нибудь опять уж вам ведь там потом себя ничего ей может они тут где
		есть надо ней для мы тебя их чем была сам чтоб без будто чего раз тоже себе под
		будет расход отчёт бюджет квартал платёж счёт сотрудник руководитель одобрение
		квитанция заявка командировка бухгалтерия проверка остаток документ срок`)
	greek = strings.Fields(`και το να του η της με που την από για τα είναι δεν στο
		ο θα σε οι στην ένα των τον λογαριασμός προϋπολογισμός έγκριση πληρωμή`)
	latin = strings.Fields("été où déjà garçon façon naïve über Straße müssen Größe " +
		"żółć święto łódź crème brûlée résumé Ångström \u212Aelvin cafe\u0301 nin\u0303o " +
		"Überprüfung Rückerstattung remboursement échéance")
	cjk = strings.Fields(`报销 截止 日期 费用 预算 审批 发票 部门 季度 财务 员工 经理
		申请 账户 余额 报告 出差 处理 提交 审核 締切 経費 精算 承認 請求書`)
)

// nonASCIIBenchText is about size bytes of dense non-ASCII prose with
// "возмещение расходов" planted a few dozen times, some misspelt, and
// the number planted.
func nonASCIIBenchText(size int) (string, int) {
	r := rand.New(rand.NewPCG(42, 8))
	var b strings.Builder
	b.Grow(size + 100)
	planted := 0
	phrases := []string{"Возмещение расходов", "возмещене расходов", "ВОЗМЕЩЕНИЕ расхдов", "Возмещенеи расходов"}
	for b.Len() < size {
		switch n := r.IntN(100); {
		case n < 10: // a CJK sentence: one long run of letters
			for range 4 + r.IntN(8) {
				b.WriteString(cjk[r.IntN(len(cjk))])
			}
			b.WriteString("。")
			continue
		case n < 20:
			b.WriteString(greek[r.IntN(len(greek))])
		case n < 30:
			b.WriteString(latin[r.IntN(len(latin))])
		default:
			if r.IntN(4000) == 0 {
				b.WriteString(phrases[r.IntN(len(phrases))])
				planted++
				break
			}
			w := cyrillic[r.IntN(len(cyrillic))]
			if r.IntN(10) == 0 {
				w = strings.ToUpper(w)
			}
			b.WriteString(w)
		}
		switch r.IntN(15) {
		case 0:
			b.WriteString(". ")
		case 1:
			b.WriteString(", ")
		case 2:
			b.WriteString(" — ")
		default:
			b.WriteByte(' ')
		}
	}
	return b.String(), planted
}

func TestNonASCIIBenchTextFindsEveryPlantedPhrase(t *testing.T) {
	t.Parallel()
	text, planted := nonASCIIBenchText(2 << 20)
	require.Positive(t, planted)
	require.Less(t, utf8.RuneCountInString(text), len(text)*6/10, "dense: most characters take two bytes or more")
	res := Search(text, "возмещние расходов", Fuzzy, DefaultContextChars, DefaultMaxChars)
	require.Equal(t, planted, res.Hits)
}

func BenchmarkSearchFuzzyNonASCII10MB(b *testing.B) {
	text, planted := nonASCIIBenchText(10 << 20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if res := Search(text, "возмещние расходов", Fuzzy, DefaultContextChars, DefaultMaxChars); res.Hits != planted {
			b.Fatalf("found %d of %d", res.Hits, planted)
		}
	}
}

// BenchmarkSearchFuzzyLatinInNonASCII10MB looks for an ASCII query in
// dense non-ASCII text: every word is still tokenized and folded.
func BenchmarkSearchFuzzyLatinInNonASCII10MB(b *testing.B) {
	text, _ := nonASCIIBenchText(10 << 20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Search(text, "remboursment echeance", Fuzzy, DefaultContextChars, DefaultMaxChars)
	}
}

// cpuLoop runs a benchmark's loop and reports, beside the wall-time MB/s,
// the MB per second of CPU it used.
func cpuLoop(b *testing.B, bytes int, f func()) {
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	before := cpuTime()
	for b.Loop() {
		f()
	}
	if used := cpuTime() - before; used > 0 && b.N > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/used.Seconds()/1e6, "MB/cpu-s")
	}
}
