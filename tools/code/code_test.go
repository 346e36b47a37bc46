package code_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/workspace"
)

func TestMain(m *testing.M) {
	// The sandbox's children are this test binary, re-executed.
	code.ServeChildIfAsked()
	os.Exit(m.Run())
}

// testBundle is a database with two conversations of one user, each with
// a turn to hang tool calls on, and a sandbox whose children are this
// test binary.
type testBundle struct {
	client      *ent.Client
	conv, other int
	turns       map[int]int
	calls       int
	sandbox     *code.Sandbox
}

func setup(t testing.TB, d *db.DB) *testBundle {
	t.Helper()
	c := d.Client()
	s := dbtest.Seed(t, c)
	b := &testBundle{client: c, turns: map[int]int{}, sandbox: sandbox(t), conv: s.Conversation, other: s.NewConversation(t, c)}
	for _, conv := range []int{b.conv, b.other} {
		b.turns[conv] = dbtest.NewTurn(t, c, conv, 1)
	}
	return b
}

// sandbox is a sandbox of this test binary, closed when the test ends.
func sandbox(t testing.TB) *code.Sandbox {
	s := code.New(os.Args[0])
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// stored is a tool result to seed, with its call.
type stored struct {
	conv      int // b.conv when zero
	ref       string
	content   string
	outcome   schematype.Outcome
	truncated bool
}

func (b *testBundle) store(t testing.TB, s stored) {
	t.Helper()
	ctx := tenancy.System(context.Background())
	if s.conv == 0 {
		s.conv = b.conv
	}
	if s.outcome == "" {
		s.outcome = schematype.OutcomeHits
	}
	sr := b.client.StoredResult.Create().SetConversationID(s.conv).SetRef(s.ref).SetKind(schematype.KindJSON).
		SetContent([]byte(s.content)).SetChars(int64(len([]rune(s.content)))).SetBytes(int64(len(s.content))).SetItems(1).
		SetTruncatedAtSource(s.truncated).SaveX(ctx)
	b.calls++
	b.client.ToolCall.Create().SetTurnID(b.turns[s.conv]).SetPosition(b.calls).SetName("research_web").
		SetOutcome(s.outcome).SetRef(s.ref).SetResultID(sr.ID).SaveX(ctx)
}

func (b *testBundle) run(t testing.TB, src string, refs ...string) (*code.Result, error) {
	t.Helper()
	return b.sandbox.Run(tenancy.System(context.Background()), b.client, b.conv, codeInput(src, refs...))
}

// codeInput is a call at the tests' turn time.
func codeInput(src string, refs ...string) code.Input {
	return code.Input{Code: src, ToolResults: refs, Now: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)}
}

func (b *testBundle) files(t testing.TB) map[string]string {
	t.Helper()
	ws := workspace.New(b.client, b.conv)
	l, err := ws.List(tenancy.System(context.Background()), nil)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range l.Files {
		text, err := ws.Text(tenancy.System(context.Background()), f.Path)
		require.NoError(t, err)
		out[f.Path] = text
	}
	return out
}

// refused checks that err is a refusal (nothing ran), whose words reach
// the model, holding every one of want.
func refused(t testing.TB, err error, want ...string) {
	t.Helper()
	var refusal *tools.Refusal
	require.ErrorAs(t, err, &refusal)
	for _, w := range want {
		require.Contains(t, err.Error(), w)
	}
}

// failed checks that err is a failed run (code ran, threw or hit a
// bound), whose words reach the model, holding every one of want.
func failed(t testing.TB, err error, want ...string) {
	t.Helper()
	var failure *tools.Failure
	require.ErrorAs(t, err, &failure)
	for _, w := range want {
		require.Contains(t, err.Error(), w)
	}
}

func TestRunReadsWholeResults(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		b.store(t, stored{ref: "r1", content: `{"rows":[{"n":1},{"n":2},{"n":39}]}`})
		b.store(t, stored{ref: "r2", content: `plain text, not JSON`})
		res, err := b.run(t, `const d = JSON.parse(toolResults[0]);
console.log(d.rows.reduce((s, r) => s + r.n, 0));
console.log(toolResults[1].toUpperCase(), toolResults.length);
console.log({at: new Date().toISOString(), now: Date.now()}, [1, "two"]);`, "r1", "r2")
		require.NoError(t, err)
		require.Equal(t, "42\nPLAIN TEXT, NOT JSON 2\n"+
			`{"at":"2026-03-01T09:30:00.000Z","now":1772357400000} [1,"two"]`+"\n", res.Output)
		require.Empty(t, res.Files)
	})
}

func TestRunWorkspace(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		ctx := tenancy.System(context.Background())
		_, err := workspace.New(b.client, b.conv).Commit(ctx, []workspace.Content{
			{Path: "data/in.csv", Text: "a,1\nb,2\nc,3\n"}, {Path: "old.txt", Text: "old"}})
		require.NoError(t, err)

		res, err := b.run(t, `const rows = workspace.read("data/in.csv").trim().split("\n").map(l => l.split(","));
const total = rows.reduce((s, r) => s + Number(r[1]), 0);
workspace.write("out/total.txt", "total " + total);
workspace.write("./old.txt", "replaced");
console.log(workspace.read("out/total.txt"));
console.log(workspace.list().map(f => f.path + ":" + f.chars).join(" "));
try { workspace.read("missing.txt") } catch (e) { console.log("caught:", e.message) }
try { workspace.write("../escape", "x") } catch (e) { console.log("caught:", e.message) }`)
		require.NoError(t, err)
		require.Equal(t, "total 6\n"+
			"data/in.csv:12 old.txt:8 out/total.txt:7\n"+
			`caught: no file "missing.txt" in the workspace`+"\n"+
			`caught: path "../escape" leaves the workspace`+"\n", res.Output)
		require.Equal(t, []workspace.Written{
			{Path: "out/total.txt", Chars: 7, Bytes: 7, Created: true},
			{Path: "old.txt", Chars: 8, Bytes: 8, Created: false},
		}, res.Files)
		require.Equal(t, map[string]string{"data/in.csv": "a,1\nb,2\nc,3\n", "old.txt": "replaced", "out/total.txt": "total 6"}, b.files(t))

		// A run that throws keeps none of its writes, and says what it printed.
		_, err = b.run(t, `workspace.write("new.txt", "x"); workspace.write("old.txt", "gone"); console.log("wrote two"); throw new Error("boom")`)
		failed(t, err, "run_code failed: Error: boom", "None of its 2 workspace writes was kept", "Before that it printed:\nwrote two\n")
		require.Equal(t, "replaced", b.files(t)["old.txt"])
		require.NotContains(t, b.files(t), "new.txt")

		// A write past the workspace's own limits is refused where it is made.
		res, err = b.run(t, `try { workspace.write("big.txt", "x".repeat(1048577)) } catch (e) { console.log(e.message) }`)
		require.NoError(t, err)
		require.Equal(t, `"big.txt": content is 1048577 bytes: a file holds at most 1048576`+"\n", res.Output)

		// The totals are checked at the end, all or nothing: 500 files at most.
		_, err = b.run(t, `for (let i = 0; i < 20; i++) workspace.write("f" + i, "x"); console.log("done")`)
		require.NoError(t, err)
		require.Len(t, b.files(t), 23)
	})
}

func TestRunRefs(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		b.store(t, stored{ref: "mine", content: `{"ok":true}`})
		b.store(t, stored{conv: b.other, ref: "theirs", content: `{"secret":1}`})
		b.store(t, stored{ref: "cut", content: `{"rows":[1,2`, truncated: true})
		b.store(t, stored{ref: "failed", content: `{}`, outcome: schematype.OutcomeError})
		// Each call would write a file if any code ran.
		const src = `workspace.write("ran.txt", "yes"); console.log(toolResults.length)`

		tests := []struct {
			give []string
			want string
		}{
			{give: []string{"theirs"}, want: `toolResults[0] (ref "theirs"): ref "theirs" not found; no code ran`},
			{give: []string{"made-up"}, want: `toolResults[0] (ref "made-up"): ref "made-up" not found; no code ran`},
			{give: []string{"mine", "theirs"}, want: `toolResults[1] (ref "theirs"): ref "theirs" not found; no code ran`},
			{give: []string{"cut"}, want: `toolResults[0] (ref "cut"): the result was truncated at its source: its text is incomplete, so it is not passed to run_code; no code ran`},
			{give: []string{"failed"}, want: `toolResults[0] (ref "failed"): its call did not succeed (error): only results of calls with hits can be passed to run_code; no code ran`},
			{give: []string{"mine", "mine", "mine", "mine"}, want: "toolResults: give at most 3 refs, not 4"},
		}
		for _, tt := range tests {
			_, err := b.run(t, src, tt.give...)
			refused(t, err)
			require.Equal(t, tt.want, err.Error())
		}
		require.Empty(t, b.files(t))
		res, err := b.run(t, src, "mine", "mine", "mine")
		require.NoError(t, err)
		require.Equal(t, "3\n", res.Output)
	})
}

func TestRunHostile(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		tests := []struct {
			name string
			give string
			want []string
		}{
			{"infinite loop", `console.log("looping"); for (;;) {}`,
				[]string{"hit its time bound: the code ran past the 5s time bound", "Before that it printed:\nlooping\n"}},
			{"allocation bomb", `console.log("bomb"); const s = "x".repeat(2 ** 30); console.log(s.length)`,
				[]string{"hit its memory bound", "512 MiB", "Before that it printed:\nbomb\n"}},
			// Time or memory, whichever it meets first (the machine's speed
			// decides); the memory bound alone is proved below.
			{"growing array", `const a = []; for (;;) a.push(a.length)`,
				[]string{"run_code hit its ", "bound", "It printed nothing before."}},
			{"100 MB of output", `const line = "y".repeat(1000); for (let i = 0; i < 100000; i++) console.log(i, line)`,
				[]string{"hit its output bound: the code printed more than 1048576 bytes", "Before that it printed 1048576 bytes, ending:\n…"}},
			{"deep recursion", `function f(n) { return f(n + 1) + 1 } f(0)`,
				[]string{"hit its call depth bound: the code calls nested deeper than 2000"}},
			{"require", `const fs = require("fs"); console.log(fs.readFileSync("/etc/passwd", "utf8"))`,
				[]string{"ReferenceError: require is not defined", "no require, fetch, process or timers"}},
			{"fetch", `fetch("http://127.0.0.1:8080/graphql").then(r => console.log(r.status))`,
				[]string{"ReferenceError: fetch is not defined"}},
			{"environment", `console.log(JSON.stringify(process.env))`,
				[]string{"ReferenceError: process is not defined"}},
			{"timers", `setTimeout(() => console.log("later"), 10)`,
				[]string{"ReferenceError: setTimeout is not defined"}},
			{"prototype pollution", `Object.prototype.polluted = "yes"`,
				[]string{"TypeError", "polluted"}},
			{"builtin override", `Array.prototype.map = function () { return ["owned"] }`,
				[]string{"TypeError", "map"}},
			{"too many writes", `for (let i = 0; i < 25; i++) workspace.write("w" + i + ".txt", "x")`,
				[]string{"hit its workspace writes bound: the code made more than 20 workspace writes", "None of its 20 workspace writes was kept"}},
			{"syntax", `console.log(`, []string{"run_code failed: SyntaxError"}},
			{"undeclared in strict mode", `leaked = 1`, []string{"ReferenceError: leaked is not defined"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := b.run(t, tt.give)
				failed(t, err, tt.want...)
			})
		}
		// Given the time, a growing array meets the memory bound.
		slow := sandbox(t)
		slow.Limits.Wall = time.Minute
		_, err := slow.Run(tenancy.System(context.Background()), b.client, b.conv, code.Input{
			Code: `const a = []; for (;;) a.push({i: a.length, s: "item " + a.length})`})
		failed(t, err, "hit its memory bound", "512 MiB")

		// Nothing of the attempts above reaches a later run, nor the files.
		res, err := b.run(t, `console.log(({}).polluted === undefined, [1].map(x => x + 1)[0], typeof require, typeof process);
const counts = {}; for (const w of ["constructor", "toString", "a", "a"]) counts[w] = (counts[w] | 0) + 1;
console.log(JSON.stringify(counts))`)
		require.NoError(t, err)
		require.Equal(t, "true 2 undefined undefined\n"+`{"constructor":1,"toString":1,"a":2}`+"\n", res.Output)
		require.Empty(t, b.files(t))
	})
}

func TestRunRefusesBadCode(t *testing.T) {
	t.Parallel()
	b := &testBundle{sandbox: sandbox(t)}
	tests := []struct {
		give string
		want string
	}{
		{give: "  ", want: "code is empty: write JavaScript that console.logs its answer"},
		{give: strings.Repeat("x", code.MaxCodeChars+1), want: fmt.Sprintf("code is %d characters: the limit is %d", code.MaxCodeChars+1, code.MaxCodeChars)},
	}
	for _, tt := range tests {
		_, err := b.sandbox.Run(tenancy.System(context.Background()), nil, 0, code.Input{Code: tt.give})
		refused(t, err)
		require.Equal(t, tt.want, err.Error())
	}
}
