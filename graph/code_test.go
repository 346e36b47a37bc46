package graph_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/runtime/preview"
	"github.com/toolgate/toolgate/tools/code"
)

// bigResult is a JSON result of about 5 MB: 40,000 orders, one of which,
// far past anything a preview shows, is the only one marked "late".
func bigResult(t testing.TB) (content string, sum int, lateID string) {
	t.Helper()
	type order struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
		Status string `json:"status"`
		Note   string `json:"note"`
	}
	orders := make([]order, 40000)
	for i := range orders {
		orders[i] = order{ID: fmt.Sprintf("ord-%05d", i), Amount: i%97 + 1, Status: "paid", Note: strings.Repeat("n", 80)}
		sum += orders[i].Amount
	}
	orders[31337].Status = "late"
	raw, err := json.Marshal(map[string]any{"orders": orders})
	require.NoError(t, err)
	require.Greater(t, len(raw), 5_000_000)
	return string(raw), sum, orders[31337].ID
}

func TestRunCodeTransformsWholeResult(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		// The parse takes a fraction of the 5 s bound on an idle machine;
		// a loaded test machine gets room, so the test checks the answer.
		roomy := code.New(os.Args[0])
		roomy.Limits.Wall = time.Minute
		t.Cleanup(func() { _ = roomy.Close() })
		b.srv.Close()
		b.srv = httptest.NewServer(graph.NewServer(graph.Config{DB: d, Signer: b.signer, Sandbox: roomy}))
		t.Cleanup(b.srv.Close)
		tok := b.alice.Token
		conv := b.startConversation(t, tok, b.createAgent(t, tok, "Analyst"), "orders")
		content, sum, lateID := bigResult(t)
		b.wsStore(t, conv, wsStored{ref: "orders-ref", content: content})

		// The model's preview of the result holds neither answer.
		pv, err := preview.Build(schematype.KindJSON, []byte(content), preview.Context{Ref: "orders-ref"})
		require.NoError(t, err)
		require.True(t, pv.Partial)
		require.NotContains(t, string(pv.Body), lateID)
		require.NotContains(t, string(pv.Body), `"late"`)

		scoped := b.scopeToken(t, conv, code.RunCode.Name)
		r := b.wsCall(t, scoped, code.RunCode, nil, map[string]any{
			"toolResults": []string{"orders-ref"},
			"code": `const {orders} = JSON.parse(toolResults[0]);
console.log(orders.length, orders.reduce((s, o) => s + o.amount, 0));
console.log(orders.filter(o => o.status === "late").map(o => o.id).join(","));
workspace.write("late.json", JSON.stringify(orders.filter(o => o.status === "late")));`,
		})
		out := r.ok(t)
		require.Equal(t, fmt.Sprintf("40000 %d\n%s\n", sum, lateID), get(out, "runCode", "output"))
		require.Equal(t, []any{map[string]any{"path": "late.json", "chars": 137.0, "created": true}}, get(out, "runCode", "files"))
		require.Equal(t, []any{"late.json"}, b.wsPaths(t, tok, conv))
	})
}

func TestRunCodeScope(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		tok := b.alice.Token
		conv := b.startConversation(t, tok, b.createAgent(t, tok, "Analyst"), "mine")
		other := b.startConversation(t, tok, b.createAgent(t, tok, "Other"), "other")
		evil := b.startConversation(t, b.eve.Token, b.createAgent(t, b.eve.Token, "Evil"), "evil")
		b.wsStore(t, conv, wsStored{ref: "here", content: `{"n": 1}`})
		b.wsStore(t, other, wsStored{ref: "elsewhere", content: `{"n": 2}`})
		b.wsStore(t, evil, wsStored{ref: "evil-ref", content: `{"n": 3}`})
		scoped := b.scopeToken(t, conv, code.RunCode.Name)
		run := func(token string, conv any, refs ...string) *response {
			return b.wsCall(t, token, code.RunCode, conv, map[string]any{
				"toolResults": refs, "code": `workspace.write("ran.txt", "x"); console.log(JSON.parse(toolResults[0]).n)`})
		}

		require.Equal(t, "1\n", get(run(scoped, nil, "here").ok(t), "runCode", "output"))
		// Another conversation's ref, another organisation's, and a made-up
		// one: the same refusal, word for word but the ref, and no code runs.
		for _, ref := range []string{"elsewhere", "evil-ref", "made-up"} {
			r := run(scoped, nil, ref)
			wsRefused(t, r, "")
			require.Equal(t, fmt.Sprintf(`toolResults[0] (ref %q): ref %q not found; no code ran`, ref, ref), r.Errors[0].Message)
		}
		require.Equal(t, []any{"ran.txt"}, b.wsPaths(t, tok, conv))
		// By hand: another organisation's conversation is not found, as is
		// a scope token that was not offered run_code.
		require.Equal(t, "NOT_FOUND", run(b.eve.Token, conv, "here").code(t))
		require.Equal(t, "NOT_FOUND", run(b.scopeToken(t, conv, "read_file"), nil, "here").code(t))
		require.Equal(t, "1\n", get(run(tok, conv, "here").ok(t), "runCode", "output"))
	})
}

// TestRunCodeHostile runs each attack through the API while another
// client's query must still be answered within a second.
func TestRunCodeHostile(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		tok := b.alice.Token
		conv := b.startConversation(t, tok, b.createAgent(t, tok, "Analyst"), "attacks")
		scoped := b.scopeToken(t, conv, code.RunCode.Name)
		// The bystander's client gives up after a second.
		bystander := &http.Client{Timeout: time.Second}
		query := func() error {
			req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { name } }"}`))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+b.bob.Token)
			res, err := bystander.Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			var body struct {
				Data struct{ Viewer struct{ Name string } }
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				return err
			}
			if body.Data.Viewer.Name != "Bob" {
				return fmt.Errorf("viewer is %q", body.Data.Viewer.Name)
			}
			return nil
		}

		tests := []struct {
			name string
			give string
			want []string
		}{
			{"infinite loop", `console.log("looping"); for (;;) {}`,
				[]string{"run_code hit its time bound", "Before that it printed:\nlooping\n"}},
			{"allocation bomb", `console.log("bomb"); "x".repeat(2 ** 30)`,
				[]string{"run_code hit its memory bound", "Before that it printed:\nbomb\n"}},
			{"100 MB of output", `const l = "y".repeat(1000); for (let i = 0; i < 100000; i++) console.log(l)`,
				[]string{"run_code hit its output bound", "Before that it printed 1048576 bytes"}},
			{"deep recursion", `function f() { return f() + 1 } f()`, []string{"run_code hit its call depth bound", "It printed nothing before."}},
			{"require", `require("fs").readFileSync("/etc/passwd")`, []string{"require is not defined"}},
			{"fetch", `fetch("http://127.0.0.1/")`, []string{"fetch is not defined"}},
			{"environment", `console.log(process.env.OPENAI_API_KEY)`, []string{"process is not defined"}},
			{"prototype pollution", `Object.prototype.isAdmin = true`, []string{"TypeError"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				done := make(chan *response, 1)
				go func() { done <- b.wsCall(t, scoped, code.RunCode, nil, map[string]any{"code": tt.give}) }()
				// While the attack runs, the bystander is served, each
				// query within a second.
				var res *response
				for queries := 0; res == nil || queries == 0; queries++ {
					require.NoError(t, query())
					select {
					case res = <-done:
					case <-time.After(50 * time.Millisecond):
					}
				}
				// It ran and failed: RUN_FAILED, not the input's fault.
				require.Equal(t, "RUN_FAILED", res.code(t), string(res.Raw))
				for _, w := range tt.want {
					require.Contains(t, res.Errors[0].Message, w)
				}
				require.NoError(t, query())
			})
		}
		// No attack left anything behind for the next run.
		r := b.wsCall(t, scoped, code.RunCode, nil, map[string]any{"code": `console.log(({}).isAdmin === undefined)`})
		require.Equal(t, "true\n", get(r.ok(t), "runCode", "output"))
		require.Empty(t, b.wsPaths(t, tok, conv))
	})
}
