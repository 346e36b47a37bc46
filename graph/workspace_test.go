package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/workspace"
)

// wsTools are the workspace tools' names, for scope tokens.
var wsTools = []string{"list_files", "search_files", "read_file", "write_file", "edit_file", "delete_file"}

// wsCall runs a workspace tool's own operation as the runtime posts it:
// the model's arguments plus conversationId (left out when conv is nil).
func (b *testBundle) wsCall(t testing.TB, token string, d tools.Definition, conv any, args map[string]any) *response {
	t.Helper()
	vars := map[string]any{}
	if conv != nil {
		vars["conversationId"] = conv
	}
	for k, v := range args {
		vars[k] = v
	}
	return b.do(t, token, d.Operation, vars)
}

// wsArgs decodes a model's arguments, written as JSON.
func wsArgs(t testing.TB, raw string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &m))
	return m
}

// wsStored is a tool result to seed straight through ent, with its call.
type wsStored struct {
	ref       string
	content   string
	kind      schematype.ResultKind
	tool      string
	outcome   schematype.Outcome
	truncated bool
}

func (b *testBundle) wsStore(t testing.TB, conversationID string, s wsStored) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	convID, err := gid.Decode(conversationID)
	require.NoError(t, err)
	if s.kind == "" {
		s.kind = schematype.KindJSON
	}
	if s.tool == "" {
		s.tool = "research_web"
	}
	if s.outcome == "" {
		s.outcome = schematype.OutcomeHits
	}
	n := b.client.Turn.Query().Where(turn.ConversationID(convID)).CountX(ctx)
	tu := b.client.Turn.Create().SetConversationID(convID).SetNumber(n + 1).SetUserText("seed").
		SetStatus(turn.StatusCOMPLETED).SaveX(ctx)
	sr := b.client.StoredResult.Create().SetConversationID(convID).SetRef(s.ref).SetKind(s.kind).
		SetContent([]byte(s.content)).SetChars(int64(len([]rune(s.content)))).SetBytes(int64(len(s.content))).
		SetItems(1).SetTruncatedAtSource(s.truncated).SaveX(ctx)
	b.client.ToolCall.Create().SetTurnID(tu.ID).SetPosition(0).SetName(s.tool).SetOutcome(s.outcome).
		SetAttempts(1).SetRef(s.ref).SetResultID(sr.ID).ExecX(ctx)
}

// wsPaths lists a conversation's files through list_files.
func (b *testBundle) wsPaths(t testing.TB, token, conv string) []any {
	t.Helper()
	files := get(b.wsCall(t, token, workspace.ListFiles, conv, nil).ok(t), "listFiles", "files").([]any)
	out := []any{}
	for _, f := range files {
		out = append(out, get(f, "path"))
	}
	return out
}

// wsRefused checks that r is a BAD_USER_INPUT refusal holding want.
func wsRefused(t testing.TB, r *response, want string) {
	t.Helper()
	require.Equal(t, "BAD_USER_INPUT", r.code(t), string(r.Raw))
	require.Contains(t, r.Errors[0].Message, want)
}

func TestWorkspaceByHand(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		tok := b.alice.Token
		conv := b.startConversation(t, tok, b.createAgent(t, tok, "Helper"), "files")

		require.Empty(t, b.wsPaths(t, tok, conv))
		w := b.wsCall(t, tok, workspace.WriteFile, conv, wsArgs(t, `{"files": [
			{"path": "docs/plan.md", "content": "# Plan\nship the workspace\nthen rest\n"},
			{"path": "./notes.txt", "content": "héllo"}]}`)).ok(t)
		require.Equal(t, []any{
			map[string]any{"path": "docs/plan.md", "chars": 36.0, "created": true},
			map[string]any{"path": "notes.txt", "chars": 5.0, "created": true},
		}, get(w, "writeFiles", "files"))

		list := b.wsCall(t, tok, workspace.ListFiles, conv, nil).ok(t)
		require.Equal(t, "docs/plan.md", get(list, "listFiles", "files", 0, "path"))
		require.NotEmpty(t, get(list, "listFiles", "files", 0, "updatedAt"))
		under := b.wsCall(t, tok, workspace.ListFiles, conv, map[string]any{"path": "docs"}).ok(t)
		require.Len(t, get(under, "listFiles", "files"), 1)

		read := b.wsCall(t, tok, workspace.ReadFile, conv, map[string]any{"path": "docs/plan.md", "offset": 7}).ok(t)
		require.Equal(t, map[string]any{
			"path": "docs/plan.md", "text": "ship the workspace\nthen rest\n", "offset": 7.0, "nextOffset": nil, "totalChars": 36.0,
		}, get(read, "readFile"))

		found := b.wsCall(t, tok, workspace.SearchFiles, conv, wsArgs(t, `{"strings": ["WORKSPACE", "missing"], "contextLines": 0}`)).ok(t)
		require.Equal(t, map[string]any{
			"matches":   []any{map[string]any{"path": "docs/plan.md", "line": 2.0, "text": "ship the workspace"}},
			"hits":      1.0,
			"shown":     1.0,
			"unmatched": []any{"missing"},
		}, get(found, "searchFiles"))

		edit := b.wsCall(t, tok, workspace.EditFile, conv, wsArgs(t, `{"path": "docs/plan.md", "edits": [{"old": "then rest", "new": "then celebrate"}]}`)).ok(t)
		require.Equal(t, map[string]any{"path": "docs/plan.md", "chars": 41.0, "edits": 1.0}, get(edit, "editFile"))

		del := b.wsCall(t, tok, workspace.DeleteFile, conv, map[string]any{"path": "notes.txt"}).ok(t)
		require.Equal(t, "notes.txt", get(del, "deleteFile", "path"))
		require.Equal(t, []any{"docs/plan.md"}, b.wsPaths(t, tok, conv))

		// An API token must name the conversation.
		r := b.wsCall(t, tok, workspace.ListFiles, nil, nil)
		wsRefused(t, r, "conversationId is required")

		// Another organisation, a colleague, and an id of nothing all read
		// the same, for every tool.
		madeUp := graph.EncodeID(1<<40 + 7)
		for _, d := range workspace.Definitions {
			args := map[string]any{
				"path": "docs/plan.md", "strings": []string{"plan"}, "files": []any{map[string]any{"path": "x", "content": "y"}},
				"edits": []any{map[string]any{"old": "Plan", "new": "Scheme"}},
			}
			vars := map[string]any{}
			for k := range args {
				if strings.Contains(d.Operation, "$"+k+":") {
					vars[k] = args[k]
				}
			}
			nothing := b.wsCall(t, b.eve.Token, d, madeUp, vars)
			require.Equal(t, "NOT_FOUND", nothing.code(t), d.Name)
			require.Equal(t, string(nothing.Raw), string(b.wsCall(t, b.eve.Token, d, conv, vars).Raw), d.Name)
			require.Equal(t, string(nothing.Raw), string(b.wsCall(t, b.bob.Token, d, conv, vars).Raw), d.Name)
		}
		require.Equal(t, []any{"docs/plan.md"}, b.wsPaths(t, tok, conv), "nothing foreign was written or deleted")
	})
}

func TestWorkspaceScopeToken(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agent := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agent, "scoped")
		second := b.startConversation(t, b.alice.Token, agent, "another")
		tok := b.scopeToken(t, conv, wsTools...)

		// The token names its conversation: no conversationId needed.
		b.wsCall(t, tok, workspace.WriteFile, nil, wsArgs(t, `{"files": [{"path": "a.txt", "content": "from the turn"}]}`)).ok(t)
		require.Equal(t, []any{"a.txt"}, b.wsPaths(t, tok, conv))
		require.Equal(t, []any{"a.txt"}, b.wsPaths(t, b.alice.Token, conv), "the same workspace by hand")
		read := b.wsCall(t, tok, workspace.ReadFile, nil, map[string]any{"path": "a.txt"}).ok(t)
		require.Equal(t, "from the turn", get(read, "readFile", "text"))

		// Another conversation of the same user reads like one of nobody.
		madeUp := graph.EncodeID(1<<40 + 9)
		foreign := b.wsCall(t, tok, workspace.ListFiles, second, nil)
		require.Equal(t, "NOT_FOUND", foreign.code(t))
		require.Equal(t, string(b.wsCall(t, tok, workspace.ListFiles, madeUp, nil).Raw), string(foreign.Raw))
		write := wsArgs(t, `{"files": [{"path": "b.txt", "content": "x"}]}`)
		w := b.wsCall(t, tok, workspace.WriteFile, second, write)
		require.Equal(t, "NOT_FOUND", w.code(t))
		require.Equal(t, string(b.wsCall(t, tok, workspace.WriteFile, madeUp, write).Raw), string(w.Raw))
		require.Empty(t, b.wsPaths(t, b.alice.Token, second))

		// A token drives only the tools its turn was offered.
		readOnly := b.scopeToken(t, conv, "list_files", "read_file")
		r := b.wsCall(t, readOnly, workspace.DeleteFile, nil, map[string]any{"path": "a.txt"})
		require.Equal(t, "NOT_FOUND", r.code(t))
		require.Equal(t, []any{"a.txt"}, b.wsPaths(t, readOnly, conv))
	})
}

func TestWorkspaceLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	tok := b.alice.Token
	conv := b.startConversation(t, tok, b.createAgent(t, tok, "Helper"), "limits")
	b.wsCall(t, tok, workspace.WriteFile, conv, wsArgs(t, `{"files": [{"path": "keep.txt", "content": "original"}]}`)).ok(t)
	long := strings.Repeat("x", workspace.MaxReplaceChars+1)

	tests := []struct {
		name string
		def  tools.Definition
		give map[string]any
		want string
	}{
		{name: "four files", def: workspace.WriteFile, give: wsArgs(t, `{"files": [{"path": "1", "content": ""}, {"path": "2", "content": ""}, {"path": "3", "content": ""}, {"path": "4", "content": ""}]}`),
			want: "files: give 1 to 3 files per call, not 4"},
		{name: "whole replace", def: workspace.WriteFile, give: map[string]any{"files": []any{map[string]any{"path": "keep.txt", "content": long}}},
			want: `files[0] "keep.txt": the file exists and replacing it whole is limited to 4000 characters (this is 4001): change it with edit_file`},
		{name: "escape", def: workspace.WriteFile, give: wsArgs(t, `{"files": [{"path": "../../etc/passwd", "content": "x"}]}`),
			want: `path "../../etc/passwd" leaves the workspace`},
		{name: "absolute", def: workspace.ReadFile, give: map[string]any{"path": "/keep.txt"}, want: `path "/keep.txt" is absolute`},
		{name: "read escape", def: workspace.ReadFile, give: map[string]any{"path": "a/../../keep.txt"}, want: "leaves the workspace"},
		{name: "small window", def: workspace.ReadFile, give: map[string]any{"path": "keep.txt", "maxChars": 100}, want: "100 is not between 1024 and 20000"},
		{name: "no file", def: workspace.ReadFile, give: map[string]any{"path": "gone.txt"}, want: `no file "gone.txt" in the workspace`},
		{name: "six strings", def: workspace.SearchFiles, give: wsArgs(t, `{"strings": ["a", "b", "c", "d", "e", "f"]}`), want: "give 1 to 5 strings, not 6"},
		{name: "context", def: workspace.SearchFiles, give: wsArgs(t, `{"strings": ["a"], "contextLines": 4}`), want: "contextLines: give 0 to 3, not 4"},
		{name: "ambiguous edit", def: workspace.EditFile, give: wsArgs(t, `{"path": "keep.txt", "edits": [{"old": "i", "new": "I"}]}`),
			want: `edits[0]: old text occurs 2 times in "keep.txt"`},
		{name: "delete nothing", def: workspace.DeleteFile, give: map[string]any{"path": "gone.txt"}, want: `no file "gone.txt"`},
	}
	for _, tt := range tests {
		wsRefused(t, b.wsCall(t, tok, tt.def, conv, tt.give), tt.want)
	}
	require.Equal(t, []any{"keep.txt"}, b.wsPaths(t, tok, conv))
	read := b.wsCall(t, tok, workspace.ReadFile, conv, map[string]any{"path": "keep.txt"}).ok(t)
	require.Equal(t, "original", get(read, "readFile", "text"))

	// A batch whose third file is refused writes nothing.
	r := b.wsCall(t, tok, workspace.WriteFile, conv, map[string]any{"files": []any{
		map[string]any{"path": "new.txt", "content": "a"},
		map[string]any{"path": "keep.txt", "content": "changed"},
		map[string]any{"path": "../third", "content": "c"},
	}})
	wsRefused(t, r, `files[2] "../third"`)
	require.Equal(t, []any{"keep.txt"}, b.wsPaths(t, tok, conv))
	read = b.wsCall(t, tok, workspace.ReadFile, conv, map[string]any{"path": "keep.txt"}).ok(t)
	require.Equal(t, "original", get(read, "readFile", "text"))
}

// wsLargeResult is a JSON result far past any preview, ending in a summary
// that holds JSON as a string.
func wsLargeResult(t testing.TB) string {
	t.Helper()
	rows := make([]map[string]any, 300)
	for i := range rows {
		rows[i] = map[string]any{"id": i, "title": fmt.Sprintf("row %d", i), "body": strings.Repeat("filler ", 15)}
	}
	report, err := json.Marshal(map[string]any{"tables": []any{map[string]any{"csv": "notes\n--- data ---\ncity,people\nOslo,709000\nBergen,291000\n--- end ---\nsource: census"}}})
	require.NoError(t, err)
	raw, err := json.Marshal(map[string]any{"result": map[string]any{"rows": rows, "summary": string(report)}})
	require.NoError(t, err)
	return string(raw)
}

func TestWorkspaceExport(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		tok := b.alice.Token
		agent := b.createAgent(t, tok, "Helper")
		conv := b.startConversation(t, tok, agent, "export")
		big := wsLargeResult(t)
		b.wsStore(t, conv, wsStored{ref: "r-big", content: big})
		b.wsStore(t, conv, wsStored{ref: "r-text", kind: schematype.KindText, content: "<h1>A</h1> <p>x</p> <p>y</p>"})
		b.wsStore(t, conv, wsStored{ref: "r-window", tool: "read_tool_result", content: `{"text": "part"}`})
		b.wsStore(t, conv, wsStored{ref: "r-failed", outcome: schematype.OutcomeError, content: `{"error": "boom"}`})
		b.wsStore(t, conv, wsStored{ref: "r-cut", truncated: true, content: `{"rows": [1]}`})

		// Through a scope token, with the arguments exactly as a model sends them.
		scoped := b.scopeToken(t, conv, wsTools...)
		w := b.wsCall(t, scoped, workspace.WriteFile, nil, wsArgs(t, `{"files": [
			{"path": "cities.csv", "_toolResultContext": {"sources": [
				{"ref": "r-big", "field": ["result", "summary", "tables", 0, "csv"], "between": ["--- data ---\n", "--- end ---"]}]}},
			{"path": "last-row.json", "_toolResultContext": {"sources": [{"ref": "r-big", "field": ["result", "rows", 299]}]}},
			{"path": "heading.txt", "_toolResultContext": {"sources": [{"ref": "r-text", "between": ["<h1>", "</h1>"]}]}}]}`)).ok(t)
		require.Equal(t, true, get(w, "writeFiles", "files", 0, "created"))

		read := func(path string) string {
			r := b.wsCall(t, scoped, workspace.ReadFile, nil, map[string]any{"path": path, "maxChars": 20000}).ok(t)
			return get(r, "readFile", "text").(string)
		}
		require.Equal(t, "city,people\nOslo,709000\nBergen,291000\n", read("cities.csv"))
		require.JSONEq(t, fmt.Sprintf(`{"id": 299, "title": "row 299", "body": %q}`, strings.Repeat("filler ", 15)), read("last-row.json"))
		require.Equal(t, "A", read("heading.txt"))
		// What was exported lies far past what a 6,000-character preview shows.
		require.Greater(t, strings.Index(big, "Bergen,291000"), 6000)
		require.Greater(t, strings.Index(big, `"row 299"`), 6000)

		tests := []struct {
			name   string
			source string
			want   string
		}{
			{name: "read window", source: `{"ref": "r-window"}`, want: `source 0 (ref "r-window"): it is a read window (read_tool_result output)`},
			{name: "failed call", source: `{"ref": "r-failed"}`, want: `source 0 (ref "r-failed"): its call did not succeed (error)`},
			{name: "truncated", source: `{"ref": "r-cut"}`, want: `source 0 (ref "r-cut"): the result was truncated at its source`},
			{name: "missing field", source: `{"ref": "r-big", "field": ["result", "summary", "tables", 0, "json"]}`,
				want: `source 0 (ref "r-big"): field ["result", "summary", "tables", "0", "json"]: no key "json" in ["result", "summary", "tables", "0"] (keys: "csv")`},
			{name: "ambiguous start", source: `{"ref": "r-text", "between": ["<p>", "</p>"]}`, want: `source 0 (ref "r-text"): between: start "<p>" occurs 2 times, so the region is ambiguous`},
			{name: "ambiguous end", source: `{"ref": "r-text", "between": ["</h1>", "</p>"]}`, want: `source 0 (ref "r-text"): between: end "</p>" occurs 2 times after the start`},
		}
		for _, tt := range tests {
			r := b.wsCall(t, scoped, workspace.WriteFile, nil, wsArgs(t, `{"files": [
				{"path": "fine.txt", "content": "fine"},
				{"path": "also-fine.txt", "content": "fine"},
				{"path": "out.txt", "_toolResultContext": {"sources": [`+tt.source+`]}}]}`))
			wsRefused(t, r, `files[2] "out.txt": `+tt.want)
		}
		require.Equal(t, []any{"cities.csv", "heading.txt", "last-row.json"}, b.wsPaths(t, tok, conv), "refused batches wrote nothing")

		// A ref of another conversation answers exactly like a ref of nothing.
		other := b.startConversation(t, tok, agent, "other")
		exportArgs := wsArgs(t, `{"files": [{"path": "stolen.txt", "_toolResultContext": {"sources": [{"ref": "r-theirs"}]}}]}`)
		madeUp := b.wsCall(t, scoped, workspace.WriteFile, nil, exportArgs)
		wsRefused(t, madeUp, `ref "r-theirs" not found`)
		b.wsStore(t, other, wsStored{ref: "r-theirs", content: `{"secret": "yes"}`})
		foreign := b.wsCall(t, scoped, workspace.WriteFile, nil, exportArgs)
		require.Equal(t, string(madeUp.Raw), string(foreign.Raw))
		byHand := b.wsCall(t, tok, workspace.WriteFile, conv, exportArgs)
		require.Equal(t, string(madeUp.Raw), string(byHand.Raw), "even for the owner, by hand, from another conversation")
		require.NotContains(t, b.wsPaths(t, tok, conv), "stolen.txt")
	})
}
