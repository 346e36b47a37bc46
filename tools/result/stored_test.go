package result

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// TestReadInPieces holds reads of large results, their windows fetched in
// pieces, to reads of the same results loaded whole, on each database:
// ASCII, dense multi-byte text whose characters chunk borders cut,
// invalid bytes, blank heads, offsets around the borders and past the
// end, one ref and several sharing the budget.
func TestReadInPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	gen := func(pieces []string, size int) string {
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	contents := map[string]struct {
		kind    schematype.ResultKind
		content string
	}{
		"r_ascii":   {schematype.KindText, gen([]string{"alpha ", "beta\n", "gamma, ", "x"}, 20000)},
		"r_dense":   {schematype.KindText, gen([]string{"дедлайн ", "报销", "😀", "é", " ", "\u212A"}, 20000)},
		"r_invalid": {schematype.KindText, gen([]string{"ok ", "д", "\xff", "\xe2\x9c", "\xf0\x9f\x98", "报", "\x80"}, 20000)},
		"r_latin1":  {schematype.KindText, gen([]string{"caf\xe9 ", "na\xefve ", "plain "}, 20000)},
		"r_blank":   {schematype.KindText, strings.Repeat(" \n", 3000) + gen([]string{"word ", "д"}, 20000)},
		"r_null":    {schematype.KindJSON, "null" + strings.Repeat(" ", 20000)},
		"r_json":    {schematype.KindJSON, `{"rows":[` + gen([]string{`"Zoë",`, `"x",`, `1,`}, 20000) + `0]}`},
		"r_small":   {schematype.KindText, "small ✓"},
		"r_media":   {schematype.KindMedia, strings.Repeat("\x89PNG", 10000)},
	}
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			testReadInPieces(t, backend, contents)
		})
	}
}

func testReadInPieces(t *testing.T, backend dbtest.Backend, contents map[string]struct {
	kind    schematype.ResultKind
	content string
}) {
	r := rand.New(rand.NewPCG(7, 12))
	{
		ctx := tenancy.System(context.Background())
		f := newFixtureOn(t, backend)
		for ref, c := range contents {
			f.store(t, f.conv, ref, c.kind, c.content)
		}
		pieces := &Reader{client: f.client, conv: f.conv, whole: 1000, chunk: 997}
		whole := &Reader{client: f.client, conv: f.conv, whole: 1 << 30}
		refs := []string{"r_ascii", "r_dense", "r_invalid", "r_latin1", "r_blank", "r_null", "r_json", "r_small", "r_media", "r_none"}
		offsets := []int{0, 1, 996, 997, 998, 1993, 1994, 5000, 9999, 19990, 19999, 20000, 20001, 25000}
		for _, ref := range refs {
			for _, off := range offsets {
				for _, budget := range []int{MinMaxChars, 3000, MaxMaxChars} {
					q := Request{Refs: []string{ref}, Offset: ptr(off), MaxChars: ptr(budget)}
					want, err := whole.Run(ctx, q)
					require.NoError(t, err)
					got, err := pieces.Run(ctx, q)
					require.NoError(t, err)
					require.Equal(t, want, got, "%s from %d, %d", ref, off, budget)
					for _, it := range got.Reads {
						if it.Text != nil && *it.Text != "" {
							// The evidence names the stored bytes the text shows.
							require.Len(t, it.Evidence, 1)
							e := it.Evidence[0]
							require.Equal(t, *it.Text, sanitize(contents[ref].content[e.Start:e.End]))
						}
					}
				}
			}
		}
		for range 40 {
			var q Request
			for range 1 + r.IntN(MaxRefs) {
				q.Refs = append(q.Refs, refs[r.IntN(len(refs))])
			}
			q.Offset, q.MaxChars = ptr(offsets[r.IntN(len(offsets))]), ptr(MinMaxChars+r.IntN(MaxMaxChars-MinMaxChars))
			want, err := whole.Run(ctx, q)
			require.NoError(t, err)
			got, err := pieces.Run(ctx, q)
			require.NoError(t, err)
			require.Equal(t, want, got, fmt.Sprint(q.Refs, *q.Offset, *q.MaxChars))
		}
	}
}

// TestCutPoint: a buffer is cut before a character its end leaves
// incomplete, and nowhere else.
func TestCutPoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"ab\xe2\x9c", 2},
		{"ab\xe2\x9c\x93", 5},
		{"a\xf0\x9f\x98", 1},
		{"a\xf0", 1},
		{"a\xff", 2},
		{"a\x80\x80\x80\x80", 5},
		{"a\xe2\x41", 3},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, cutPoint([]byte(tt.give)), "%q", tt.give)
		require.Equal(t, utf8.RuneCountInString(tt.give), utf8.RuneCountInString(tt.give[:tt.want])+utf8.RuneCountInString(tt.give[tt.want:]))
	}
}
