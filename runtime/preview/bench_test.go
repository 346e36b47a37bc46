package preview

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var benchWords = strings.Fields(`the quarterly report shows revenue growth across all regions while
	operating costs fell slightly compared with last year management expects further
	improvement in reimbursement processing and customer satisfaction café naïve résumé
	deadline invoice supplier contract renewal "quoted" back\slash tab	separated`)

type benchComment struct {
	User  string  `json:"user"`
	Text  string  `json:"text"`
	Score float64 `json:"score"`
}

type benchRecord struct {
	ID        int            `json:"id"`
	Title     string         `json:"title"`
	Author    map[string]any `json:"author"`
	Tags      []string       `json:"tags"`
	Body      string         `json:"body"`
	Comments  []benchComment `json:"comments"`
	Scores    []float64      `json:"scores"`
	Published bool           `json:"published"`
	Parent    *int           `json:"parent"`
}

func sentence(r *rand.Rand, words int) string {
	var b strings.Builder
	for i := range words {
		if i > 0 {
			if r.IntN(12) == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(benchWords[r.IntN(len(benchWords))])
	}
	return b.String()
}

// benchJSON is a deterministic JSON array of records of about size bytes:
// nested objects and arrays, long strings with escapes and accents.
func benchJSON(tb testing.TB, size int) []byte {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var records []benchRecord
	n := 0
	for n < size {
		rec := benchRecord{
			ID:        len(records) + 1,
			Title:     sentence(r, 4+r.IntN(6)),
			Author:    map[string]any{"name": sentence(r, 2), "email": "someone@example.com", "roles": []string{"editor", "owner"}},
			Body:      sentence(r, 150+r.IntN(400)),
			Published: r.IntN(2) == 0,
		}
		for range r.IntN(8) {
			rec.Tags = append(rec.Tags, benchWords[r.IntN(len(benchWords))])
		}
		for range r.IntN(6) {
			rec.Comments = append(rec.Comments, benchComment{User: sentence(r, 1), Text: sentence(r, 10+r.IntN(40)), Score: r.Float64() * 5})
		}
		for range r.IntN(20) {
			rec.Scores = append(rec.Scores, float64(r.IntN(100000))/100)
		}
		if r.IntN(3) == 0 {
			p := r.IntN(rec.ID)
			rec.Parent = &p
		}
		b, err := json.Marshal(rec)
		require.NoError(tb, err)
		n += len(b) + 1
		records = append(records, rec)
	}
	b, err := json.Marshal(records)
	require.NoError(tb, err)
	return b
}

func BenchmarkBuild10MBJSON(b *testing.B) {
	content := benchJSON(b, 10<<20)
	counts := Measure(JSON, content)
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := Build(JSON, content, Context{Ref: "r_bench", Counts: counts})
		if err != nil || !res.Partial {
			b.Fatal(err)
		}
	}
}

func BenchmarkMeasure10MBJSON(b *testing.B) {
	content := benchJSON(b, 10<<20)
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		Measure(JSON, content)
	}
}

func BenchmarkBuild10MBText(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	content := []byte(sentence(r, 2_000_000))[:10<<20]
	counts := Measure(Text, content)
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(Text, content, Context{Ref: "r_bench", Counts: counts}); err != nil {
			b.Fatal(err)
		}
	}
}
