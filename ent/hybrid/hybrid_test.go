package hybrid_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/tools/embed"
)

type testBundle struct {
	ctx   context.Context
	store *hybrid.Store
}

func setup(t *testing.T, d *db.DB) *testBundle {
	t.Helper()
	return &testBundle{ctx: context.Background(), store: hybrid.New(d.SQL, d.Dialect, "test")}
}

// topic stands in for a semantic embedder: texts about the same thing get
// the same direction, whatever their words.
func topic(axis int) []float32 {
	v := make([]float32, 8)
	v[axis] = 1
	return v
}

func TestSearchFindsExactTermsAndParaphrases(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		require.NoError(t, b.store.Put(b.ctx,
			hybrid.Entry{ID: 1, Scope: "kb:1", Text: "Expenses are reimbursed until the 5th of the following month.", Vector: topic(0)},
			hybrid.Entry{ID: 2, Scope: "kb:1", Text: "The cafeteria opens at noon and closes at three.", Vector: topic(1)},
			hybrid.Entry{ID: 3, Scope: "kb:1", Text: "Error code ZX-4411 means the VPN token expired.", Vector: topic(2)},
			hybrid.Entry{ID: 4, Scope: "kb:2", Text: "Another organisation's cafeteria menu: reimbursement ZX-4411.", Vector: topic(0)},
		))

		tests := []struct {
			name string
			give hybrid.Query
			want []int64
		}{
			{"exact rare term", hybrid.Query{Scopes: []string{"kb:1"}, Text: "what is ZX-4411"}, []int64{3}},
			{"stemmed word", hybrid.Query{Scopes: []string{"kb:1"}, Text: "reimbursement"}, []int64{1}},
			{"paraphrase, no shared word", hybrid.Query{Scopes: []string{"kb:1"}, Text: "when do I get my money back",
				Vector: topic(0), MinSimilarity: 0.5}, []int64{1}},
			{"both lists agree first", hybrid.Query{Scopes: []string{"kb:1"}, Text: "cafeteria hours", Vector: topic(1), MinSimilarity: 0.5}, []int64{2}},
			{"nothing near, nothing matched", hybrid.Query{Scopes: []string{"kb:1"}, Text: "quantum chromodynamics", Vector: topic(5), MinSimilarity: 0.5}, nil},
			{"other scope unseen", hybrid.Query{Scopes: []string{"kb:3"}, Text: "cafeteria", Vector: topic(1)}, nil},
			{"no scope", hybrid.Query{Text: "cafeteria"}, nil},
		}
		for _, tt := range tests {
			hits, err := b.store.Search(b.ctx, tt.give)
			require.NoError(t, err, tt.name)
			var got []int64
			for _, h := range hits {
				got = append(got, h.ID)
			}
			require.Equal(t, tt.want, got, tt.name)
		}
	})
}

func TestSearchFusesRanksAndSeesWrites(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		local := embed.NewLocal()
		texts := []string{
			"Quarterly revenue grew twelve percent on strong subscriptions.",
			"Revenue recognition follows the delivery of each subscription month.",
			"Parking permits are issued by the front desk.",
		}
		vecs, err := local.Embed(b.ctx, texts)
		require.NoError(t, err)
		for i, text := range texts {
			require.NoError(t, b.store.Put(b.ctx, hybrid.Entry{ID: int64(i + 10), Scope: "kb:1", Text: text, Vector: vecs[i]}))
		}
		q, err := local.Embed(b.ctx, []string{"revenue growth"})
		require.NoError(t, err)
		hits, err := b.store.Search(b.ctx, hybrid.Query{Scopes: []string{"kb:1"}, Text: "revenue growth", Vector: q[0], MinSimilarity: 0.1, Limit: 2})
		require.NoError(t, err)
		require.Len(t, hits, 2)
		require.Equal(t, int64(10), hits[0].ID)
		for _, h := range hits {
			require.Positive(t, h.TextRank)
			require.Positive(t, h.VectorRank)
			require.InDelta(t, 1.0/float64(hybrid.RRFK+h.TextRank)+1.0/float64(hybrid.RRFK+h.VectorRank), h.Score, 1e-9)
		}

		// A replaced and a removed passage are seen by the next search
		// (the vector cache notices).
		require.NoError(t, b.store.Put(b.ctx, hybrid.Entry{ID: 10, Scope: "kb:1", Text: "Parking is free on Sundays.", Vector: vecs[2]}))
		require.NoError(t, b.store.Delete(b.ctx, 11))
		hits, err = b.store.Search(b.ctx, hybrid.Query{Scopes: []string{"kb:1"}, Text: "revenue growth", Vector: q[0], MinSimilarity: 0.1})
		require.NoError(t, err)
		require.Empty(t, hits)
		require.NoError(t, b.store.DeleteScope(b.ctx, "kb:1"))
		hits, err = b.store.Search(b.ctx, hybrid.Query{Scopes: []string{"kb:1"}, Text: "parking"})
		require.NoError(t, err)
		require.Empty(t, hits)
	})
}
