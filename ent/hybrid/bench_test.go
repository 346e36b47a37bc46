package hybrid_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/document/documenttest"
	"github.com/toolgate/toolgate/tools/embed"
)

// BenchmarkSearch10k measures one hybrid search (text and vector, local
// embedder) over 10,000 passages of about a thousand characters in one
// scope, beside 10,000 more of other scopes, on each database; p50-ms is
// the median. The passages are prose-like: a vocabulary of 20,000 words
// drawn with Zipf frequencies, so common words match thousands of
// passages and a query's rarer words a few, as in real documents.
func BenchmarkSearch10k(b *testing.B) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			d := dbtest.Open(b, backend)
			ctx := context.Background()
			store := hybrid.New(d.SQL, d.Dialect, "bench")
			corpus := documenttest.NewCorpus(7, 20_000)
			const total, batch = 20_000, 500
			for start := 0; start < total; start += batch {
				entries := make([]hybrid.Entry, batch)
				for i := range entries {
					text := corpus.Text(document.ChunkChars - 200)
					scope := "kb:1"
					if (start+i)%2 == 1 {
						scope = "kb:2"
					}
					entries[i] = hybrid.Entry{ID: int64(start + i + 1), Scope: scope, Text: text, Vector: embed.Vector(text)}
				}
				require.NoError(b, store.Put(ctx, entries...))
			}
			// What autovacuum does on a live database after a bulk load: the
			// planner's statistics, and the visibility map index-only scans read.
			if d.Dialect == "postgres" {
				_, err := d.SQL.ExecContext(ctx, "VACUUM ANALYZE hybrid_entries")
				require.NoError(b, err)
			}
			queries := make([]string, 64)
			for i := range queries {
				queries[i] = corpus.Query(3)
			}
			vecs, err := embed.NewLocal().Embed(ctx, queries)
			require.NoError(b, err)
			// The first search of a scope loads its vectors; later ones reuse them.
			_, err = store.Search(ctx, hybrid.Query{Scopes: []string{"kb:1"}, Text: queries[0], Vector: vecs[0]})
			require.NoError(b, err)
			times := make([]time.Duration, 0, b.N)
			found := 0
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				q := i % len(queries)
				hits, err := store.Search(ctx, hybrid.Query{Scopes: []string{"kb:1"}, Text: queries[q], Vector: vecs[q],
					MinSimilarity: document.MinSimilarityLexical, Limit: document.DefaultMaxResults})
				if err != nil {
					b.Fatalf("search: %v", err)
				}
				times = append(times, time.Since(start))
				if len(hits) > 0 {
					found++
				}
			}
			if found == 0 {
				b.Fatal("no search found anything")
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(times[len(times)*9/10].Microseconds())/1000, "p90-ms")
		})
	}
}
