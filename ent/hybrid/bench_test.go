package hybrid_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/db/dbtest"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/tools/embed"
)

// benchWords is the vocabulary of the generated passages.
var benchWords = strings.Fields(`policy expense travel revenue budget contract invoice customer vendor
	deadline meeting report quarter growth subscription parking holiday salary payroll security
	password network laptop office remote training onboarding benefit insurance pension audit
	compliance privacy retention archive backup incident outage release roadmap hiring interview`)

// BenchmarkSearch10k measures one hybrid search (text and vector, local
// embedder) over 10,000 passages of about 80 words in one scope, on each
// database; p50-ms is the median.
func BenchmarkSearch10k(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			d := dbtest.Open(b, backend)
			ctx := context.Background()
			store := hybrid.New(d.SQL, d.Dialect, "bench")
			local := embed.NewLocal()
			rng := rand.New(rand.NewPCG(1, 2))
			const total, batch = 10_000, 500
			for start := 0; start < total; start += batch {
				entries := make([]hybrid.Entry, batch)
				for i := range entries {
					words := make([]string, 80)
					for j := range words {
						words[j] = benchWords[rng.IntN(len(benchWords))]
					}
					text := strings.Join(words, " ")
					entries[i] = hybrid.Entry{ID: int64(start + i + 1), Scope: "kb:1", Text: text, Vector: embed.Vector(text)}
				}
				require.NoError(b, store.Put(ctx, entries...))
			}
			queries := []string{"travel expense deadline", "quarter revenue growth", "password security incident", "holiday payroll"}
			vecs, err := local.Embed(ctx, queries)
			require.NoError(b, err)
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				hits, err := store.Search(ctx, hybrid.Query{Scopes: []string{"kb:1"}, Text: queries[i%4], Vector: vecs[i%4], MinSimilarity: 0.1, Limit: 8})
				if err != nil || len(hits) == 0 {
					b.Fatalf("search: %v, %d hits", err, len(hits))
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
