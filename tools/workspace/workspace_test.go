package workspace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools/workspace"
)

// testBundle is a database with two conversations of one user, each with
// a turn to hang tool calls on.
type testBundle struct {
	client      *ent.Client
	conv, other int
	turns       map[int]int
	calls       int
}

func setup(t testing.TB, d *db.DB) *testBundle {
	t.Helper()
	c := d.Client()
	s := dbtest.Seed(t, c)
	b := &testBundle{client: c, turns: map[int]int{}, conv: s.Conversation, other: s.NewConversation(t, c)}
	for _, conv := range []int{b.conv, b.other} {
		b.turns[conv] = dbtest.NewTurn(t, c, conv, 1)
	}
	return b
}

// stored is a tool result to seed, with its call.
type stored struct {
	conv      int // b.conv when zero
	ref       string
	kind      schematype.ResultKind
	content   string
	tool      string
	outcome   schematype.Outcome
	truncated bool
	noCall    bool
}

func (b *testBundle) store(t testing.TB, s stored) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	if s.conv == 0 {
		s.conv = b.conv
	}
	if s.kind == "" {
		s.kind = schematype.KindJSON
	}
	if s.tool == "" {
		s.tool = "research_web"
	}
	if s.outcome == "" {
		s.outcome = schematype.OutcomeHits
	}
	sr := b.client.StoredResult.Create().SetConversationID(s.conv).SetRef(s.ref).SetKind(s.kind).
		SetContent([]byte(s.content)).SetChars(int64(len([]rune(s.content)))).SetBytes(int64(len(s.content))).SetItems(1).
		SetTruncatedAtSource(s.truncated).SaveX(ctx)
	if s.noCall {
		return
	}
	b.calls++
	b.client.ToolCall.Create().SetTurnID(b.turns[s.conv]).SetPosition(b.calls).SetName(s.tool).
		SetOutcome(s.outcome).SetRef(s.ref).SetResultID(sr.ID).SaveX(ctx)
}

// inTx runs f on conv's workspace in a transaction, as a mutation does:
// committed on success, rolled back on error.
func inTx[T any](t testing.TB, b *testBundle, conv int, f func(w *workspace.Workspace) (T, error)) (T, error) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	tx, err := b.client.Tx(ctx)
	require.NoError(t, err)
	res, err := f(workspace.New(tx.Client(), conv))
	if err != nil {
		require.NoError(t, tx.Rollback())
		return res, err
	}
	require.NoError(t, tx.Commit())
	return res, nil
}

func (b *testBundle) write(t testing.TB, files ...*workspace.FileInput) (*workspace.WriteResult, error) {
	t.Helper()
	return inTx(t, b, b.conv, func(w *workspace.Workspace) (*workspace.WriteResult, error) {
		return w.Write(tenancy.System(context.Background()), files)
	})
}

func (b *testBundle) edit(t testing.TB, path string, edits ...*workspace.EditInput) (*workspace.EditResult, error) {
	t.Helper()
	return inTx(t, b, b.conv, func(w *workspace.Workspace) (*workspace.EditResult, error) {
		return w.Edit(tenancy.System(context.Background()), path, edits)
	})
}

func (b *testBundle) ws() *workspace.Workspace { return workspace.New(b.client, b.conv) }

// paths lists the conversation's files.
func (b *testBundle) paths(t testing.TB) []string {
	t.Helper()
	l, err := b.ws().List(tenancy.System(context.Background()), nil)
	require.NoError(t, err)
	out := []string{}
	for _, f := range l.Files {
		out = append(out, f.Path)
	}
	return out
}

func (b *testBundle) content(t testing.TB, path string) string {
	t.Helper()
	max := 20000
	p, err := b.ws().Read(tenancy.System(context.Background()), path, nil, &max)
	require.NoError(t, err)
	require.Nil(t, p.NextOffset)
	return p.Text
}

func text(path, content string) *workspace.FileInput {
	return &workspace.FileInput{Path: path, Content: &content}
}

func export(path string, sources ...*workspace.Source) *workspace.FileInput {
	return &workspace.FileInput{Path: path, ToolResultContext: &workspace.ExportContext{Sources: sources}}
}

func field(steps ...any) []workspace.FieldStep {
	out := make([]workspace.FieldStep, len(steps))
	for i, s := range steps {
		out[i] = workspace.FieldStep(fmt.Sprint(s))
	}
	return out
}

// refused checks that err is a refusal whose message holds every want.
func refused(t testing.TB, err error, want ...string) {
	t.Helper()
	var r *workspace.Refusal
	require.ErrorAs(t, err, &r)
	for _, w := range want {
		require.Contains(t, r.Error(), w)
	}
}

func ptr[T any](v T) *T { return &v }

func TestCleanPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give    string
		want    string
		wantErr string
	}{
		{give: "notes.md", want: "notes.md"},
		{give: "./a//b/../c.txt", want: "a/c.txt"},
		{give: "dir/", want: "dir"},
		{give: "a/../../b", wantErr: "leaves the workspace"},
		{give: "..", wantErr: "leaves the workspace"},
		{give: "../etc/passwd", wantErr: "leaves the workspace"},
		{give: "/etc/passwd", wantErr: "is absolute"},
		{give: ".", wantErr: "names the workspace itself"},
		{give: "a/..", wantErr: "names the workspace itself"},
		{give: "", wantErr: "path is empty"},
		{give: "a\x00b", wantErr: "control character"},
		{give: "a\nb", wantErr: "control character"},
		{give: `a\b`, wantErr: "backslash"},
		{give: "bad\xffutf8", wantErr: "not valid UTF-8"},
		{give: strings.Repeat("é", workspace.MaxPathChars), want: strings.Repeat("é", workspace.MaxPathChars)},
		{give: strings.Repeat("é", workspace.MaxPathChars+1), wantErr: "the limit is 255"},
	}
	for _, tt := range tests {
		got, err := workspace.CleanPath(tt.give)
		if tt.wantErr != "" {
			refused(t, err, tt.wantErr)
			continue
		}
		require.NoError(t, err, tt.give)
		require.Equal(t, tt.want, got)
	}
}

func TestWriteReadListDelete(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())

		empty, err := b.ws().List(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, empty.Files)

		res, err := b.write(t, text("./docs/plan.md", "# Plan\nstep 1\n"), text("b.txt", "héllo"))
		require.NoError(t, err)
		require.Equal(t, []workspace.Written{
			{Path: "docs/plan.md", Chars: 14, Bytes: 14, Created: true},
			{Path: "b.txt", Chars: 5, Bytes: 6, Created: true},
		}, res.Files)
		require.Equal(t, []string{"b.txt", "docs/plan.md"}, b.paths(t))

		// Another conversation's workspace is its own.
		other, err := workspace.New(b.client, b.other).List(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, other.Files)
		_, err = workspace.New(b.client, b.other).Read(ctx, "b.txt", nil, nil)
		refused(t, err, `no file "b.txt"`)

		under, err := b.ws().List(ctx, ptr("docs/"))
		require.NoError(t, err)
		require.Len(t, under.Files, 1)
		require.Equal(t, "docs/plan.md", under.Files[0].Path)
		_, err = b.ws().List(ctx, ptr("../x"))
		refused(t, err, "leaves the workspace")

		res, err = b.write(t, text("b.txt", "replaced"))
		require.NoError(t, err)
		require.False(t, res.Files[0].Created)
		require.Equal(t, "replaced", b.content(t, "b.txt"))

		_, err = b.ws().Delete(ctx, "b.txt")
		require.NoError(t, err)
		_, err = b.ws().Delete(ctx, "b.txt")
		refused(t, err, `no file "b.txt" in the workspace`)
		require.Equal(t, []string{"docs/plan.md"}, b.paths(t))
	})
}

func TestReadWindows(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	ctx := tenancy.System(context.Background())
	body := strings.Repeat("0123456789", 1000) + "é"
	_, err := b.write(t, text("big.txt", body))
	require.NoError(t, err)

	first, err := b.ws().Read(ctx, "big.txt", nil, nil)
	require.NoError(t, err)
	require.Len(t, first.Text, 4000)
	require.Equal(t, 10001, first.TotalChars)
	require.Equal(t, 4000, *first.NextOffset)

	last, err := b.ws().Read(ctx, "big.txt", ptr(10000), ptr(1024))
	require.NoError(t, err)
	require.Equal(t, "é", last.Text)
	require.Nil(t, last.NextOffset)

	tests := []struct {
		offset, maxChars *int
		want             string
	}{
		{maxChars: ptr(1023), want: "not between 1024 and 20000"},
		{maxChars: ptr(20001), want: "not between 1024 and 20000"},
		{offset: ptr(-1), want: "offset -1 is negative"},
		{offset: ptr(10001), want: "past the end"},
	}
	for _, tt := range tests {
		_, err := b.ws().Read(ctx, "big.txt", tt.offset, tt.maxChars)
		refused(t, err, tt.want)
	}
}

func TestWriteLimits(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())
		long := strings.Repeat("x", workspace.MaxReplaceChars+1)

		_, err := b.write(t)
		refused(t, err, "give 1 to 3 files per call, not 0")
		_, err = b.write(t, text("1", ""), text("2", ""), text("3", ""), text("4", ""))
		refused(t, err, "give 1 to 3 files per call, not 4")

		_, err = b.write(t, text("a", "one"), text("./a", "two"))
		refused(t, err, `files[1] "./a": the batch already writes "a"`)
		_, err = b.write(t, &workspace.FileInput{Path: "a"})
		refused(t, err, "give content or _toolResultContext")
		_, err = b.write(t, text("nul", "a\x00b"))
		refused(t, err, "NUL character")
		_, err = b.write(t, text("huge", strings.Repeat("x", workspace.MaxFileBytes+1)))
		refused(t, err, "a file holds at most 1048576")

		// A new file may be long; replacing an existing one whole may not.
		_, err = b.write(t, text("long.txt", long))
		require.NoError(t, err)
		_, err = b.write(t, text("long.txt", long))
		refused(t, err, `files[0] "long.txt": the file exists and replacing it whole is limited to 4000 characters (this is 4001): change it with edit_file`)
		_, err = b.write(t, text("long.txt", long[1:]))
		require.NoError(t, err, "4,000 characters may replace")

		// A file cannot be a folder, nor a folder a file.
		_, err = b.write(t, text("long.txt/inner", "x"))
		refused(t, err, `"long.txt" is a file, so it cannot be a folder`)
		_, err = b.write(t, text("dir/a", "x"), text("dir", "y"))
		refused(t, err, `"dir" is a folder (it holds "dir/a")`)
		require.Equal(t, []string{"long.txt"}, b.paths(t))

		// Workspace totals, seeded straight: sizes are what the limits read.
		seed := make([]*ent.WorkspaceFileCreate, workspace.MaxFiles-2)
		for i := range seed {
			seed[i] = b.client.WorkspaceFile.Create().SetConversationID(b.conv).SetPath(fmt.Sprintf("seed/%03d", i)).
				SetContent("s").SetChars(1).SetBytes(1)
		}
		b.client.WorkspaceFile.CreateBulk(seed...).ExecX(ctx)
		_, err = b.write(t, text("n1", "x"), text("n2", "x"))
		refused(t, err, "the workspace would hold 501 files: the limit is 500")
		_, err = b.write(t, text("n1", "x"))
		require.NoError(t, err, "the 500th file")
		_, err = b.write(t, text("n1", "replaced"))
		require.NoError(t, err, "a replace adds no file")

		_, err = b.client.WorkspaceFile.Delete().Exec(ctx)
		require.NoError(t, err)
		b.client.WorkspaceFile.Create().SetConversationID(b.conv).SetPath("bulk").
			SetContent("s").SetChars(1).SetBytes(workspace.MaxWorkspaceBytes - 10).ExecX(ctx)
		_, err = b.write(t, text("eleven", strings.Repeat("x", 11)))
		refused(t, err, fmt.Sprintf("the workspace would hold %d bytes: the limit is %d", workspace.MaxWorkspaceBytes+1, workspace.MaxWorkspaceBytes))
		_, err = b.write(t, text("ten", strings.Repeat("x", 10)))
		require.NoError(t, err)
		// The other conversation's workspace is not counted.
		_, err = inTx(t, b, b.other, func(w *workspace.Workspace) (*workspace.WriteResult, error) {
			return w.Write(ctx, []*workspace.FileInput{text("eleven", strings.Repeat("x", 11))})
		})
		require.NoError(t, err)
	})
}

func TestBatchAllOrNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		_, err := b.write(t, text("keep.txt", "original"), text("other.txt", "other"))
		require.NoError(t, err)
		b.store(t, stored{ref: "cut", content: `{"a": 1}`, truncated: true})

		tests := []struct {
			name  string
			third *workspace.FileInput
			want  string
		}{
			{name: "path escape", third: text("../out", "x"), want: `files[2] "../out": path "../out" leaves the workspace`},
			{name: "truncated export", third: export("c.json", &workspace.Source{Ref: "cut"}), want: `files[2] "c.json": source 0 (ref "cut"): the result was truncated`},
			{name: "whole replace", third: text("other.txt", strings.Repeat("y", 5000)), want: `files[2] "other.txt": the file exists`},
			{name: "folder conflict", third: text("new1/x", "z"), want: `files[2] "new1/x": "new1" is a file`},
		}
		for _, tt := range tests {
			_, err := b.write(t, text("new1", "a"), text("keep.txt", "changed"), tt.third)
			refused(t, err, tt.want)
			require.Equal(t, []string{"keep.txt", "other.txt"}, b.paths(t), tt.name)
			require.Equal(t, "original", b.content(t, "keep.txt"), tt.name)
		}
	})
}

func TestEdit(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		_, err := b.write(t, text("f.go", "func a() {}\nfunc b() {}\nreturn 1\nreturn 1\n"))
		require.NoError(t, err)

		res, err := b.edit(t, "f.go",
			&workspace.EditInput{Old: "func a()", New: "func alpha()"},
			&workspace.EditInput{Old: "alpha() {}\nfunc b", New: "alpha() {}\nfunc beta"})
		require.NoError(t, err)
		require.Equal(t, &workspace.EditResult{Path: "f.go", Chars: 49, Bytes: 49, Edits: 2}, res)
		const edited = "func alpha() {}\nfunc beta() {}\nreturn 1\nreturn 1\n"
		require.Equal(t, edited, b.content(t, "f.go"))

		tests := []struct {
			name  string
			path  string
			edits []*workspace.EditInput
			want  string
		}{
			{name: "ambiguous", path: "f.go", edits: []*workspace.EditInput{{Old: "return 1", New: "return 2"}},
				want: `edits[0]: old text occurs 2 times in "f.go": include more of the text around it`},
			{name: "overlapping", path: "f.go", edits: []*workspace.EditInput{{Old: "n 1\nreturn 1\n", New: ""}, {Old: "1\nr", New: ""}},
				want: `edits[1]: old text not found in "f.go" (after the edits before it)`},
			{name: "second fails, first undone", path: "f.go", edits: []*workspace.EditInput{{Old: "beta", New: "gamma"}, {Old: "nothing", New: "x"}},
				want: "edits[1]: old text not found"},
			{name: "empty old", path: "f.go", edits: []*workspace.EditInput{{Old: "", New: "x"}}, want: "old is empty"},
			{name: "no edits", path: "f.go", want: "give 1 to 20 edits per call, not 0"},
			{name: "too many", path: "f.go", edits: make([]*workspace.EditInput, 21), want: "not 21"},
			{name: "no file", path: "g.go", edits: []*workspace.EditInput{{Old: "a", New: "b"}}, want: `no file "g.go"`},
			{name: "escape", path: "../f.go", edits: []*workspace.EditInput{{Old: "a", New: "b"}}, want: "leaves the workspace"},
			{name: "too large", path: "f.go", edits: []*workspace.EditInput{{Old: "beta", New: strings.Repeat("x", workspace.MaxFileBytes)}}, want: "a file holds at most"},
		}
		for _, tt := range tests {
			_, err := b.edit(t, tt.path, tt.edits...)
			refused(t, err, tt.want)
			require.Equal(t, edited, b.content(t, "f.go"), tt.name)
		}
	})
}

func TestSearch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())
		lines := make([]string, 20)
		for i := range lines {
			lines[i] = fmt.Sprintf("line %d", i+1)
		}
		lines[4] = "the Needle is here"
		lines[6] = "another needle"
		lines[15] = "Grüße aus KÖLN"
		_, err := b.write(t, text("a.txt", strings.Join(lines, "\n")), text("b.txt", "no match\r\nNEEDLE\r\nend"))
		require.NoError(t, err)
		_, err = inTx(t, b, b.other, func(w *workspace.Workspace) (*workspace.WriteResult, error) {
			return w.Write(ctx, []*workspace.FileInput{text("secret.txt", "needle in another conversation")})
		})
		require.NoError(t, err)

		res, err := b.ws().Search(ctx, []string{"needle", "köln", "absent", "needle", "NEEDLE IS"}, nil)
		require.NoError(t, err)
		require.Equal(t, &workspace.SearchResult{
			Matches: []workspace.Match{
				{Path: "a.txt", Line: 4, Text: "line 4\nthe Needle is here\nline 6\nanother needle\nline 8"},
				{Path: "a.txt", Line: 15, Text: "line 15\nGrüße aus KÖLN\nline 17"},
				{Path: "b.txt", Line: 1, Text: "no match\nNEEDLE\nend"},
			},
			Hits: 4, Shown: 4, Unmatched: []string{"absent"},
		}, res)

		none, err := b.ws().Search(ctx, []string{"absent"}, ptr(0))
		require.NoError(t, err)
		require.Zero(t, none.Hits)
		require.Empty(t, none.Matches)
		raw, err := json.Marshal(none)
		require.NoError(t, err)
		require.True(t, workspace.SearchFiles.Absent(raw), string(raw))
		raw, err = json.Marshal(res)
		require.NoError(t, err)
		require.False(t, workspace.SearchFiles.Absent(raw))

		tight, err := b.ws().Search(ctx, []string{"NEEDLE"}, ptr(0))
		require.NoError(t, err)
		require.Equal(t, []workspace.Match{
			{Path: "a.txt", Line: 5, Text: "the Needle is here"},
			{Path: "a.txt", Line: 7, Text: "another needle"},
			{Path: "b.txt", Line: 2, Text: "NEEDLE"},
		}, tight.Matches)

		tests := []struct {
			strings []string
			context *int
			want    string
		}{
			{strings: nil, want: "give 1 to 5 strings, not 0"},
			{strings: []string{"a", "b", "c", "d", "e", "f"}, want: "give 1 to 5 strings, not 6"},
			{strings: []string{"a"}, context: ptr(4), want: "contextLines: give 0 to 3, not 4"},
			{strings: []string{"a"}, context: ptr(-1), want: "not -1"},
			{strings: []string{"ok", ""}, want: "strings[1] is empty"},
			{strings: []string{"a\nb"}, want: "line break"},
			{strings: []string{strings.Repeat("é", workspace.MaxStringChars+1)}, want: "strings[0] is 501 characters: the limit is 500"},
		}
		for _, tt := range tests {
			_, err := b.ws().Search(ctx, tt.strings, tt.context)
			refused(t, err, tt.want)
		}
	})
}

func TestSearchBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	ctx := tenancy.System(context.Background())
	long := strings.Repeat("a", 1000) + "TARGET" + strings.Repeat("b", 1000)
	many := strings.Repeat("hit "+strings.Repeat("x", 90)+"\n", 200)
	_, err := b.write(t, text("long.txt", long), text("many.txt", many))
	require.NoError(t, err)

	res, err := b.ws().Search(ctx, []string{"target"}, nil)
	require.NoError(t, err)
	require.Len(t, res.Matches, 1)
	cut := res.Matches[0].Text
	require.Contains(t, cut, "TARGET")
	require.Equal(t, workspace.MaxLineChars+2, len([]rune(cut)), "cut around the match, marked both ends")
	require.True(t, strings.HasPrefix(cut, "…a") && strings.HasSuffix(cut, "b…"))

	res, err = b.ws().Search(ctx, []string{"hit"}, ptr(0))
	require.NoError(t, err)
	require.Equal(t, 200, res.Hits)
	require.Less(t, res.Shown, res.Hits)
	total := 0
	for _, m := range res.Matches {
		total += len([]rune(m.Text))
	}
	require.LessOrEqual(t, total+len(res.Matches)-1, workspace.MaxSearchChars)
	require.Greater(t, total, workspace.MaxSearchChars-100, "the budget is used")
	require.Len(t, res.Matches, 1, "adjacent matching lines form one excerpt")
	require.Equal(t, 1, res.Matches[0].Line)
	require.Equal(t, res.Shown, strings.Count(res.Matches[0].Text, "hit "))
}

// largeResult is a JSON result far larger than a preview: 200 items, then
// a report holding JSON as a string, as many tools return it.
func largeResult(t testing.TB) string {
	t.Helper()
	items := make([]map[string]any, 200)
	for i := range items {
		items[i] = map[string]any{"id": i, "name": fmt.Sprintf("item %d", i), "notes": strings.Repeat("lorem ipsum ", 20)}
	}
	report, err := json.Marshal(map[string]any{"summary": map[string]any{
		"csv": "preamble\nBEGIN\nid,total\n1,10\n2,20\nEND\ntrailer",
	}})
	require.NoError(t, err)
	raw, err := json.Marshal(map[string]any{"data": map[string]any{"items": items, "report": string(report)}})
	require.NoError(t, err)
	return string(raw)
}

func TestExport(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		big := largeResult(t)
		b.store(t, stored{ref: "big", content: big})
		b.store(t, stored{ref: "page", kind: schematype.KindText, content: "Title\n<main>body text</main>\nfooter"})

		res, err := b.write(t,
			export("report.csv", &workspace.Source{Ref: "big", Field: field("data", "report", "summary", "csv"), Between: []string{"BEGIN\n", "END"}}),
			export("item.json", &workspace.Source{Ref: "big", Field: field("data", "items", 199)}),
			export("joined.txt",
				&workspace.Source{Ref: "big", Field: field("data", "items", "150", "name")},
				&workspace.Source{Ref: "page", Between: []string{"<main>", "</main>"}},
				&workspace.Source{Ref: "page", Between: []string{"", "\n<main>"}}),
		)
		require.NoError(t, err)
		require.Len(t, res.Files, 3)

		csv := b.content(t, "report.csv")
		require.Equal(t, "id,total\n1,10\n2,20\n", csv)
		item := b.content(t, "item.json")
		require.JSONEq(t, fmt.Sprintf(`{"id":199,"name":"item 199","notes":%q}`, strings.Repeat("lorem ipsum ", 20)), item)
		// Both come from far past anything a 6,000-character preview shows.
		require.Greater(t, strings.Index(big, `"item 199"`), 6000)
		require.Greater(t, strings.Index(big, `2,20`), 6000)
		require.Equal(t, "item 150\nbody text\nTitle", b.content(t, "joined.txt"))

		// Equal delimiters mark the one region between their two places.
		b.store(t, stored{ref: "fence", kind: schematype.KindText, content: "x ```go\ncode\n``` z"})
		_, err = b.write(t, export("code.go", &workspace.Source{Ref: "fence", Between: []string{"```", "```"}}))
		require.NoError(t, err)
		require.Equal(t, "go\ncode\n", b.content(t, "code.go"))

		// An export may replace an existing file whole, however long: the
		// model types none of it.
		_, err = b.write(t, export("item.json", &workspace.Source{Ref: "big", Field: field("data", "items")}))
		require.NoError(t, err)
		whole, err := b.ws().Read(tenancy.System(context.Background()), "item.json", nil, nil)
		require.NoError(t, err)
		require.Greater(t, whole.TotalChars, 5*workspace.MaxReplaceChars)
	})
}

func TestExportRefusals(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		b.store(t, stored{ref: "big", content: largeResult(t)})
		b.store(t, stored{ref: "page", kind: schematype.KindText, content: "a START b END c END d START"})
		b.store(t, stored{ref: "fence", kind: schematype.KindText, content: "x ``` y ``` z ``` w"})
		b.store(t, stored{ref: "window", tool: "read_tool_result", content: `{"text": "abc"}`})
		b.store(t, stored{ref: "failed", outcome: schematype.OutcomeError, content: `{"error": "boom"}`})
		b.store(t, stored{ref: "outage", outcome: schematype.OutcomeOutage, content: `{}`})
		b.store(t, stored{ref: "absent", outcome: schematype.OutcomeAbsence, content: `{"hits": []}`})
		b.store(t, stored{ref: "orphan", noCall: true, content: `{"a": 1}`})
		b.store(t, stored{ref: "cut", truncated: true, content: `{"a": 1}`})
		b.store(t, stored{ref: "image", kind: schematype.KindMedia, content: "\x89PNG"})

		src := func(ref string, f []workspace.FieldStep, between ...string) *workspace.Source {
			s := &workspace.Source{Ref: ref, Field: f}
			if between != nil {
				s.Between = between
			}
			return s
		}
		tests := []struct {
			name string
			give *workspace.Source
			want string
		}{
			{name: "made-up ref", give: src("nope", nil), want: `source 0 (ref "nope"): ref "nope" not found`},
			{name: "read window", give: src("window", nil), want: "it is a read window (read_tool_result output)"},
			{name: "failed call", give: src("failed", nil), want: "its call did not succeed (error)"},
			{name: "outage", give: src("outage", nil), want: "its call did not succeed (outage)"},
			{name: "absence", give: src("absent", nil), want: "its call did not succeed (absence)"},
			{name: "no call", give: src("orphan", nil), want: "its call did not succeed (no call recorded)"},
			{name: "truncated", give: src("cut", nil), want: "truncated at its source"},
			{name: "media", give: src("image", nil), want: "media, not text"},
			{name: "missing key", give: src("big", field("data", "rows")), want: `field ["data", "rows"]: no key "rows" in ["data"] (keys: "items", "report")`},
			{name: "index past end", give: src("big", field("data", "items", 200)), want: `no element 200 in ["data", "items"] (it has 200)`},
			{name: "key into list", give: src("big", field("data", "items", "first")), want: `is a list: give an index from 0, not "first"`},
			{name: "into a string", give: src("big", field("data", "items", 0, "name", "x")), want: `["data", "items", "0", "name"] is a string that is not JSON`},
			{name: "into a number", give: src("big", field("data", "items", 0, "id", "x")), want: "is a number, so it has no"},
			{name: "field of text", give: src("page", field("a")), want: "plain text, not JSON: leave out field"},
			{name: "start twice", give: src("page", nil, "START", "END"), want: `start "START" occurs 2 times, so the region is ambiguous`},
			{name: "end twice", give: src("page", nil, "a START", "END"), want: `end "END" occurs 2 times after the start`},
			{name: "no start", give: src("page", nil, "BEGIN", "END"), want: `start "BEGIN" not found`},
			{name: "no end", give: src("page", nil, "d START", "END"), want: `end "END" not found after the start`},
			{name: "same delimiter thrice", give: src("fence", nil, "```", "```"), want: "occurs 3 times"},
			{name: "one delimiter", give: src("page", nil, "START"), want: "give two delimiters, [start, end], not 1"},
			{name: "between of JSON field", give: src("big", field("data", "report", "summary", "csv"), "1,", "0"), want: `end "0" occurs 2 times`},
		}
		for _, tt := range tests {
			_, err := b.write(t, text("first.txt", "fine"), export("out.txt", tt.give))
			refused(t, err, `files[1] "out.txt": `, tt.want)
			require.Empty(t, b.paths(t), tt.name)
		}

		// Another conversation's ref reads exactly like a made-up one.
		_, madeUp := b.write(t, export("out.txt", src("theirs", nil)))
		b.store(t, stored{conv: b.other, ref: "theirs", content: `{"secret": 1}`})
		_, foreign := b.write(t, export("out.txt", src("theirs", nil)))
		refused(t, foreign, "not found")
		require.Equal(t, madeUp.Error(), foreign.Error())

		_, err := b.write(t, export("out.txt"))
		refused(t, err, "give 1 to 10 sources, not 0")
		eleven := make([]*workspace.Source, workspace.MaxSources+1)
		for i := range eleven {
			eleven[i] = src("big", field("data", "items", i, "name"))
		}
		_, err = b.write(t, export("out.txt", eleven...))
		refused(t, err, "give 1 to 10 sources, not 11")
		res, err := b.write(t, export("ten.txt", eleven[:10]...))
		require.NoError(t, err)
		require.Equal(t, "item 0\nitem 1\nitem 2", b.content(t, "ten.txt")[:20])
		require.Equal(t, 10, strings.Count(b.content(t, "ten.txt"), "item "), res)
		_, err = b.write(t, &workspace.FileInput{Path: "x", Content: ptr("a"), ToolResultContext: &workspace.ExportContext{}})
		refused(t, err, "not both")
	})
}

func TestFieldStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give any
		want workspace.FieldStep
	}{
		{give: "rows", want: "rows"},
		{give: json.Number("3"), want: "3"},
		{give: int64(4), want: "4"},
		{give: 5, want: "5"},
		{give: float64(6), want: "6"},
	}
	for _, tt := range tests {
		var s workspace.FieldStep
		require.NoError(t, s.UnmarshalGQL(tt.give))
		require.Equal(t, tt.want, s)
	}
	var s workspace.FieldStep
	require.Error(t, s.UnmarshalGQL(true))
	var steps []workspace.FieldStep
	require.NoError(t, json.Unmarshal([]byte(`["a", 0]`), &steps))
	require.Equal(t, []workspace.FieldStep{"a", "0"}, steps)
}
