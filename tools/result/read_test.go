package result

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	q := ptr("reimbursement deadline")
	tests := []struct {
		name    string
		give    Request
		wantErr string
	}{
		{name: "one ref", give: Request{Refs: []string{"a"}}},
		{name: "three refs, bounds", give: Request{Refs: []string{"a", "b", "c"}, Offset: ptr(0), MaxChars: ptr(MinMaxChars)}},
		{name: "search with everything", give: Request{Refs: []string{"a"}, Query: q, Match: ptr(Fuzzy), ContextChars: ptr(MaxContextChars), MaxChars: ptr(MaxMaxChars), Offset: ptr(0)}},
		{name: "no refs", give: Request{}, wantErr: "refs: name 1 to 3 refs"},
		{name: "four refs", give: Request{Refs: []string{"a", "b", "c", "d"}}, wantErr: "refs: at most 3 refs per call, got 4"},
		{name: "maxChars too small", give: Request{Refs: []string{"a"}, MaxChars: ptr(1023)}, wantErr: "maxChars out of range: 1023 is not between 1024 and 20000"},
		{name: "maxChars too large", give: Request{Refs: []string{"a"}, MaxChars: ptr(20001), Query: q}, wantErr: "maxChars out of range: 20001 is not between 1024 and 20000"},
		{name: "negative offset", give: Request{Refs: []string{"a"}, Offset: ptr(-1)}, wantErr: "offset: -1 is negative"},
		{name: "match without query", give: Request{Refs: []string{"a"}, Match: ptr(Fuzzy)}, wantErr: "match and contextChars go with query"},
		{name: "contextChars without query", give: Request{Refs: []string{"a"}, ContextChars: ptr(10)}, wantErr: "match and contextChars go with query"},
		{name: "empty query", give: Request{Refs: []string{"a"}, Query: ptr(" \n")}, wantErr: "query is empty"},
		{name: "offset in search", give: Request{Refs: []string{"a"}, Query: q, Offset: ptr(10)}, wantErr: "offset pages reads, not searches"},
		{name: "unknown match", give: Request{Refs: []string{"a"}, Query: q, Match: ptr(Match("regex"))}, wantErr: `match: "regex" is not "exact" or "fuzzy"`},
		{name: "contextChars too large", give: Request{Refs: []string{"a"}, Query: q, ContextChars: ptr(1001)}, wantErr: "contextChars: 1001 is not between 0 and 1000"},
		{name: "contextChars negative", give: Request{Refs: []string{"a"}, Query: q, ContextChars: ptr(-1)}, wantErr: "contextChars: -1 is not between 0 and 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.give.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.IsType(t, &Refusal{}, err)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestShare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		budget int
		give   []int
		want   []int
	}{
		{budget: 4000, give: []int{10000}, want: []int{4000}},
		{budget: 4000, give: []int{100}, want: []int{100}},
		{budget: 4000, give: []int{100, 10000, 10000}, want: []int{100, 1950, 1950}},
		{budget: 4000, give: []int{10000, 100, 3000}, want: []int{1950, 100, 1950}},
		{budget: 4000, give: []int{1000, 1000, 1000}, want: []int{1000, 1000, 1000}},
		{budget: 1024, give: []int{5000, 5000, 5000}, want: []int{341, 341, 342}},
		{budget: 4000, give: []int{0, 0, 9000}, want: []int{0, 0, 4000}},
	}
	for _, tt := range tests {
		got := make([]int, len(tt.give))
		sum := 0
		for j := range tt.give {
			got[j] = share(tt.budget, tt.give, j)
			sum += got[j]
		}
		require.Equal(t, tt.want, got, "%d %v", tt.budget, tt.give)
		require.LessOrEqual(t, sum, tt.budget)
	}
}

func TestByteOffsets(t *testing.T) {
	t.Parallel()
	const multi = "héllo wörld ✓ 😀 done"
	long := strings.Repeat(multi, 50)
	tests := []struct {
		name  string
		text  string
		chars []int
		want  []int
	}{
		{name: "ascii", text: "abcdef", chars: []int{0, 3, 6}, want: []int{0, 3, 6}},
		{name: "multi-byte", text: multi, chars: []int{2, 1, 14, 15, 20}, want: []int{3, 1, 18, 22, 27}},
		{name: "past the end", text: multi, chars: []int{25}, want: []int{27}},
		{name: "long, out of order", text: long, chars: []int{20*40 + 14, 20 * 3}, want: []int{27*40 + 18, 27 * 3}},
		// An invalid byte is one character, as Window counts it.
		{name: "invalid", text: "a\xffb\xe2\x9cc✓", chars: []int{1, 2, 3, 4, 5, 6, 7}, want: []int{1, 2, 3, 4, 5, 6, 9}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, byteOffsets(tt.text, utf8.ValidString(tt.text), tt.chars), tt.name)
	}
}

func TestAbsent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want bool
	}{
		{give: `null`, want: true},
		{give: `{"reads":[{"ref":"a","absent":true,"error":null}],"searches":[],"failures":[],"evidence":[]}`, want: true},
		{give: `{"reads":[{"ref":"a","absent":false,"error":"ref \"a\" not found"}],"searches":[],"failures":[{"item":0}],"evidence":[]}`, want: true},
		{give: `{"reads":[{"ref":"a","absent":false,"error":null,"text":""}],"searches":[]}`, want: false},
		{give: `{"reads":[{"absent":true,"error":null},{"absent":false,"error":null}],"searches":[]}`, want: false},
		{give: `{"reads":[],"searches":[{"ref":"a","hits":0,"absent":false,"error":null}]}`, want: true},
		{give: `{"reads":[],"searches":[{"hits":0},{"hits":2}]}`, want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Absent(json.RawMessage(tt.give)), tt.give)
	}
}

func TestMatchGQL(t *testing.T) {
	t.Parallel()
	var m Match
	require.NoError(t, m.UnmarshalGQL("fuzzy"))
	require.Equal(t, Fuzzy, m)
	require.NoError(t, m.UnmarshalGQL("EXACT"))
	require.Equal(t, Exact, m, "SCREAMING_CASE is the enum's way; the lower case stays accepted")
	require.NoError(t, m.UnmarshalGQL("FUZZY"))
	require.Equal(t, Fuzzy, m)
	require.EqualError(t, m.UnmarshalGQL("Fuzzy"), `match: "Fuzzy" is not "exact" or "fuzzy"`)
	require.EqualError(t, m.UnmarshalGQL(3), "match: want a string, got int")
	var b strings.Builder
	Exact.MarshalGQL(&b)
	require.Equal(t, `"exact"`, b.String())
}

// fixture is a conversation with stored results, written through an
// unscoped client.
type fixture struct {
	client      *ent.Client
	sql         *sql.DB
	conv, other int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, dbtest.SQLite)
}

func newFixtureOn(t testing.TB, backend dbtest.Backend) *fixture {
	t.Helper()
	d := dbtest.Open(t, backend)
	c := d.Client()
	s := dbtest.Seed(t, c)
	return &fixture{client: c, sql: d.SQL, conv: s.Conversation, other: s.NewConversation(t, c)}
}

func (f *fixture) store(t testing.TB, conv int, ref string, kind schematype.ResultKind, content string) {
	t.Helper()
	f.client.StoredResult.Create().SetConversationID(conv).SetRef(ref).SetKind(kind).SetContent([]byte(content)).
		SetChars(int64(utf8.RuneCountInString(content))).SetBytes(int64(len(content))).SetItems(1).
		SaveX(tenancy.System(context.Background()))
}

// requireEvidence checks that each span names exactly the stored bytes
// the shown text came from.
func requireEvidence(t *testing.T, content, ref string, spans []schematype.Span, shown ...string) {
	t.Helper()
	require.Len(t, spans, len(shown))
	for i, s := range spans {
		require.Equal(t, ref, s.Ref)
		require.Equal(t, shown[i], content[s.Start:s.End])
	}
}

func TestReaderReads(t *testing.T) {
	t.Parallel()
	ctx := tenancy.System(context.Background())
	f := newFixture(t)
	long := strings.Repeat("héllo wörld ✓ 😀 ", 300) // 16 characters, 23 bytes a time
	f.store(t, f.conv, "r_long", schematype.KindText, long)
	f.store(t, f.conv, "r_json", schematype.KindJSON, `{"rows":[{"name":"Zoë"}]}`)
	f.store(t, f.conv, "r_empty", schematype.KindText, " \n")
	f.store(t, f.conv, "r_null", schematype.KindJSON, "null")
	f.store(t, f.conv, "r_png", schematype.KindMedia, "\x89PNG\r\n")
	f.store(t, f.other, "r_other", schematype.KindText, "another conversation's")
	r := New(f.client, f.conv)

	// Default budget, then on from nextOffset to the end.
	res, err := r.Run(ctx, Request{Refs: []string{"r_long"}})
	require.NoError(t, err)
	it := res.Reads[0]
	require.Equal(t, 16*300, *it.TotalChars)
	require.Equal(t, DefaultMaxChars, utf8.RuneCountInString(*it.Text))
	require.Equal(t, DefaultMaxChars, *it.NextOffset)
	requireEvidence(t, long, "r_long", res.Evidence, *it.Text)
	require.Equal(t, res.Evidence, it.Evidence)
	require.Empty(t, res.Searches)
	require.Empty(t, res.Failures)

	res, err = r.Run(ctx, Request{Refs: []string{"r_long"}, Offset: ptr(1000), MaxChars: ptr(MaxMaxChars)})
	require.NoError(t, err)
	it = res.Reads[0]
	require.Equal(t, 1000, *it.Offset)
	require.Nil(t, it.NextOffset)
	require.Equal(t, string([]rune(long)[1000:]), *it.Text)
	requireEvidence(t, long, "r_long", res.Evidence, *it.Text)
	require.Equal(t, int64(len(long)), res.Evidence[0].End)

	// Past the end: an empty window that says where the end is, no evidence.
	res, err = r.Run(ctx, Request{Refs: []string{"r_long"}, Offset: ptr(5000)})
	require.NoError(t, err)
	require.Equal(t, "", *res.Reads[0].Text)
	require.Equal(t, 16*300, *res.Reads[0].Offset)
	require.Empty(t, res.Evidence)
	require.False(t, Absent(mustJSON(t, res)))

	// One budget for three refs, in request order; refused and absent
	// refs keep their places.
	res, err = r.Run(ctx, Request{Refs: []string{"r_other", "r_json", "r_long"}, MaxChars: ptr(MinMaxChars)})
	require.NoError(t, err)
	require.Equal(t, `ref "r_other" not found`, *res.Reads[0].Error)
	require.Nil(t, res.Reads[0].Kind)
	require.Equal(t, []schematype.ItemFailure{{Item: 0, Input: "r_other", Kind: schematype.FailureRefused, Message: `ref "r_other" not found`}}, res.Failures)
	require.Equal(t, `{"rows":[{"name":"Zoë"}]}`, *res.Reads[1].Text)
	require.Equal(t, schematype.KindJSON, *res.Reads[1].Kind)
	require.Equal(t, MinMaxChars-utf8.RuneCountInString(*res.Reads[1].Text), utf8.RuneCountInString(*res.Reads[2].Text))
	requireEvidence(t, long, "r_long", res.Reads[2].Evidence, *res.Reads[2].Text)
	require.Len(t, res.Evidence, 2)
	require.Equal(t, schematype.Span{Ref: "r_json", Start: 0, End: int64(len(`{"rows":[{"name":"Zoë"}]}`))}, res.Evidence[0])

	res, err = r.Run(ctx, Request{Refs: []string{"r_empty", "r_null", "r_png"}})
	require.NoError(t, err)
	require.True(t, res.Reads[0].Absent)
	require.True(t, res.Reads[1].Absent)
	require.Nil(t, res.Reads[0].Text)
	require.False(t, res.Reads[2].Absent)
	require.Equal(t, schematype.KindMedia, *res.Reads[2].Kind)
	require.Equal(t, 6, *res.Reads[2].Bytes)
	require.Nil(t, res.Reads[2].Text)
	require.Empty(t, res.Evidence)
	require.Empty(t, res.Failures)

	res, err = r.Run(ctx, Request{Refs: []string{"r_empty", "r_null", "nowhere"}})
	require.NoError(t, err)
	require.True(t, Absent(mustJSON(t, res)))

	// Anywhere reaches every conversation the client does.
	res, err = Anywhere(f.client).Run(ctx, Request{Refs: []string{"r_other"}})
	require.NoError(t, err)
	require.Equal(t, "another conversation's", *res.Reads[0].Text)

	_, err = r.Run(ctx, Request{Refs: []string{"a", "b", "c", "d"}})
	require.IsType(t, &Refusal{}, err)
}

func TestReaderSearches(t *testing.T) {
	t.Parallel()
	ctx := tenancy.System(context.Background())
	f := newFixture(t)
	policy := strings.Repeat("Travel is booked through the portal. ", 40) +
		"Claims: the Reimbursement Deadline is 30 days after the trip — no exceptions. " +
		strings.Repeat("Hotels must be approved. ", 40) +
		"Late claims miss the reimbursement deadline and are refused."
	notes := "Zoë's notes: the reimbursement  deadline moved?"
	f.store(t, f.conv, "r_policy", schematype.KindText, policy)
	f.store(t, f.conv, "r_notes", schematype.KindJSON, notes)
	f.store(t, f.conv, "r_png", schematype.KindMedia, "\x89PNG")
	r := New(f.client, f.conv)

	tests := []struct {
		name      string
		query     string
		match     Match
		wantHits  []int
		wantEdits int
	}{
		{name: "exact, any case", query: "reimbursement deadline", match: Exact, wantHits: []int{2, 0}},
		{name: "exact misses a typo", query: "reimbursment deadline", match: Exact, wantHits: []int{0, 0}},
		{name: "fuzzy, one typo", query: "reimbursment deadline", match: Fuzzy, wantHits: []int{2, 1}, wantEdits: 1},
		{name: "fuzzy, two typos", query: "reimbursment dedline", match: Fuzzy, wantHits: []int{2, 1}, wantEdits: 2},
		{name: "fuzzy, two typos in a word", query: "riembursment deadline", match: Fuzzy, wantHits: []int{2, 1}, wantEdits: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := r.Run(ctx, Request{Refs: []string{"r_policy", "r_notes", "r_png"}, Query: &tt.query, Match: &tt.match, ContextChars: ptr(20)})
			require.NoError(t, err)
			require.Empty(t, res.Reads)
			require.Len(t, res.Searches, 3)
			var spans []schematype.Span
			for i, content := range []string{policy, notes} {
				it := res.Searches[i]
				require.Equal(t, tt.wantHits[i], it.Hits, "ref %d", i)
				require.Equal(t, it.Hits, it.Shown)
				var shown []string
				for _, ex := range it.Excerpts {
					require.Equal(t, tt.wantEdits, ex.Edits)
					require.Contains(t, strings.ToLower(ex.Text), "deadline")
					shown = append(shown, ex.Text)
				}
				requireEvidence(t, content, it.Ref, it.Evidence, shown...)
				spans = append(spans, it.Evidence...)
			}
			require.Equal(t, 0, res.Searches[2].Hits)
			require.Empty(t, res.Searches[2].Evidence)
			require.Equal(t, nonNil(spans), res.Evidence)
			require.Equal(t, tt.wantHits[0]+tt.wantHits[1] == 0, Absent(mustJSON(t, res)))
		})
	}
}

func TestReaderSearchSharesBudget(t *testing.T) {
	t.Parallel()
	ctx := tenancy.System(context.Background())
	f := newFixture(t)
	// Far more matches than any budget shows.
	many := strings.Repeat("the needle in the haystack — ", 2000)
	f.store(t, f.conv, "r_a", schematype.KindText, many)
	f.store(t, f.conv, "r_b", schematype.KindText, many)
	f.store(t, f.conv, "r_c", schematype.KindText, "one needle only")
	res, err := New(f.client, f.conv).Run(ctx, Request{Refs: []string{"r_a", "r_b", "r_c"}, Query: ptr("needle"), MaxChars: ptr(MinMaxChars), ContextChars: ptr(0)})
	require.NoError(t, err)
	shown := 0
	for _, it := range res.Searches {
		for _, ex := range it.Excerpts {
			shown += utf8.RuneCountInString(ex.Text)
		}
	}
	require.LessOrEqual(t, shown, MinMaxChars)
	require.Equal(t, 2000, res.Searches[0].Hits)
	require.Less(t, res.Searches[0].Shown, 2000)
	require.Positive(t, res.Searches[1].Shown)
	require.Equal(t, 1, res.Searches[2].Shown)
	require.Len(t, res.Evidence, res.Searches[0].Shown+res.Searches[1].Shown+1)
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func nonNil(s []schematype.Span) []schematype.Span {
	if s == nil {
		return []schematype.Span{}
	}
	return s
}

// BenchmarkRun reads and searches three stored results of 4 MB each, as
// one call does once the rows are loaded: a window deep in each, and a
// fuzzy search of all three.
func BenchmarkRun(b *testing.B) {
	text := strings.Repeat("Travel claims: the reimbursement deadline is 30 days — Zoë’s café ✓. ", 60000)
	rows := map[string]*searched{}
	refs := []string{"r_a", "r_b", "r_c"}
	for _, ref := range refs {
		rows[ref] = &searched{Ref: ref, Kind: string(schematype.KindText), Content: sql.NullString{String: text, Valid: true}}
	}
	whole := map[string]*stored{}
	for _, ref := range refs {
		whole[ref] = &stored{Ref: ref, Kind: string(schematype.KindText), Whole: []byte(text), Bytes: int64(len(text))}
	}
	b.Run("read", func(b *testing.B) {
		b.SetBytes(int64(3 * len(text)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := (&Reader{}).read(context.Background(), Request{Refs: refs, Offset: ptr(3_000_000)}, whole, MaxMaxChars); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("search", func(b *testing.B) {
		b.SetBytes(int64(3 * len(text)))
		b.ReportAllocs()
		for b.Loop() {
			search(Request{Refs: refs, Query: ptr("reimbursment deadline"), Match: ptr(Fuzzy)}, rows, DefaultMaxChars)
		}
	})
}

// BenchmarkReaderDB reads a window of, and searches, a 10 MB stored result
// on each database, the rows loaded as the API loads them.
func BenchmarkReaderDB(b *testing.B) {
	text, _ := benchText(10 << 20)
	dense, _ := nonASCIIBenchText(10 << 20)
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			ctx := tenancy.System(context.Background())
			f := newFixtureOn(b, backend)
			f.store(b, f.conv, "r_ascii", schematype.KindText, text)
			f.store(b, f.conv, "r_dense", schematype.KindText, dense)
			r := New(f.client, f.conv)
			cases := []struct {
				name string
				q    Request
			}{
				{"window-start", Request{Refs: []string{"r_ascii"}}},
				{"window-deep", Request{Refs: []string{"r_ascii"}, Offset: ptr(9_000_000)}},
				{"window-deep-dense", Request{Refs: []string{"r_dense"}, Offset: ptr(5_000_000)}},
				{"search-exact", Request{Refs: []string{"r_ascii"}, Query: ptr("reimbursement deadline")}},
				{"search-fuzzy", Request{Refs: []string{"r_ascii"}, Query: ptr("reimbursment deadline"), Match: ptr(Fuzzy)}},
				{"search-fuzzy-dense", Request{Refs: []string{"r_dense"}, Query: ptr("возмещние расходов"), Match: ptr(Fuzzy)}},
			}
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					cpuLoop(b, len(text), func() {
						if _, err := r.Run(ctx, c.q); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
		})
	}
}

// TestStoredResultsUncompressed: on PostgreSQL the content is kept out of
// line and uncompressed, so a window reads only its pages; migrating again
// leaves it so.
func TestStoredResultsUncompressed(t *testing.T) {
	d := dbtest.Open(t, dbtest.Postgres)
	ctx := context.Background()
	require.NoError(t, d.Migrate(ctx))
	var storage string
	require.NoError(t, d.SQL.QueryRowContext(ctx, `SELECT attstorage FROM pg_attribute
		WHERE attrelid = to_regclass('stored_results') AND attname = 'content'`).Scan(&storage))
	require.Equal(t, "e", storage)
}

// TestReaderSearchesEmptyContent: an empty stored result, which a
// database may give back as NULL, searches as absent on each database.
func TestReaderSearchesEmptyContent(t *testing.T) {
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		t.Run(string(backend), func(t *testing.T) {
			ctx := tenancy.System(context.Background())
			f := newFixtureOn(t, backend)
			f.store(t, f.conv, "r_void", schematype.KindText, "")
			f.store(t, f.conv, "r_bad", schematype.KindText, "caf\xe9 deadline \xff deadline")
			res, err := New(f.client, f.conv).Run(ctx, Request{Refs: []string{"r_void", "r_bad"}, Query: ptr("DEADLINE"), ContextChars: ptr(1)})
			require.NoError(t, err)
			require.True(t, res.Searches[0].Absent)
			require.Equal(t, 0, *res.Searches[0].Bytes)
			require.Nil(t, res.Searches[0].Error)
			it := res.Searches[1]
			require.Equal(t, 2, it.Hits)
			require.Equal(t, []Excerpt{{Offset: 4, Text: " deadline ", MatchOffset: 5, Hits: 1}, {Offset: 15, Text: " deadline", MatchOffset: 16, Hits: 1}}, it.Excerpts)
			requireEvidence(t, "caf\xe9 deadline \xff deadline", "r_bad", it.Evidence, " deadline ", " deadline")
		})
	}
}
