package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readmeBlocks returns the operations of the README's graphql blocks
// from a heading to the next (to; none: the end), one operation per
// blank-line-separated paragraph.
func readmeBlocks(t *testing.T, readme, from, to string) []string {
	t.Helper()
	start := strings.Index(readme, from)
	require.GreaterOrEqual(t, start, 0, "the README has %q", from)
	section := readme[start:]
	if to != "" {
		section = section[:strings.Index(section, to)]
	}
	var ops []string
	for _, m := range regexp.MustCompile("(?s)```graphql\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, op := range strings.Split(m[1], "\n\n") {
			if op = strings.TrimSpace(op); op != "" {
				ops = append(ops, op)
			}
		}
	}
	require.NotEmpty(t, ops, "graphql examples after %q", from)
	return ops
}

// TestREADMEExamplesOnTheDemo runs the Quick start's examples, and the
// runCode one of docs/tools.md, as a newcomer would: against a fresh `serve --demo` at the
// pace `make run` plays, each on the ids the earlier ones answered. Every
// example answers without errors; "What is 2/3?" is answered through the
// calculator, and its subscription hears the turn, not only its end.
func TestREADMEExamplesOnTheDemo(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	quick := readmeBlocks(t, readme, "## Quick start", "## Commands")
	tools, err := os.ReadFile("../../docs/tools.md")
	require.NoError(t, err)
	var runCode string
	for _, op := range readmeBlocks(t, string(tools), "# Tools", "") {
		if strings.HasPrefix(op, "mutation { runCode(") {
			runCode = op
			break
		}
	}
	require.NotEmpty(t, runCode, "the runCode example of docs/tools.md")

	ctx, cancel := context.WithCancel(context.Background())
	var out, logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--demo", "--addr", "127.0.0.1:0", "--database-url", "sqlite://" + filepath.Join(t.TempDir(), "t.db")}, &out, &logs)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("server did not stop")
		}
	}()
	re := regexp.MustCompile(`playground, signed in: (http://\S+)/playground#token=(\S+)`)
	var m []string
	require.Eventually(t, func() bool { m = re.FindStringSubmatch(out.String()); return m != nil }, 20*time.Second, 20*time.Millisecond)
	base, token := m[1], m[2]

	post := func(q string, accept string) *http.Response {
		body, err := json.Marshal(map[string]string{"query": q})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(string(body)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", accept)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return res
	}
	type answer struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []map[string]any           `json:"errors"`
	}
	query := func(q string) answer {
		res := post(q, "application/json")
		defer res.Body.Close()
		var a answer
		require.NoError(t, json.NewDecoder(res.Body).Decode(&a))
		require.Empty(t, a.Errors, "the README's example answers without errors: %s", q)
		return a
	}
	id := func(a answer, field string) string {
		var v struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.Unmarshal(a.Data[field], &v))
		require.NotEmpty(t, v.ID, field)
		return v.ID
	}

	// The demo's own turn is answered first (the runCode example reads it).
	var demo struct {
		Conversations struct {
			Edges []struct {
				Node struct {
					ID    string `json:"id"`
					Turns struct {
						Edges []struct {
							Node struct {
								Status    string `json:"status"`
								Answer    string `json:"answer"`
								ToolCalls []struct {
									Name string `json:"name"`
									Ref  string `json:"ref"`
								} `json:"toolCalls"`
							} `json:"node"`
						} `json:"edges"`
					} `json:"turns"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"conversations"`
	}
	require.Eventually(t, func() bool {
		a := query(`{ conversations(first: 1) { edges { node { id turns(first: 1) { edges { node { status answer toolCalls { name ref } } } } } } } }`)
		raw, _ := json.Marshal(a.Data)
		require.NoError(t, json.Unmarshal(raw, &demo))
		e := demo.Conversations.Edges
		return len(e) == 1 && len(e[0].Node.Turns.Edges) == 1 && e[0].Node.Turns.Edges[0].Node.Status == "COMPLETED"
	}, 30*time.Second, 100*time.Millisecond, "the demo's first turn completes")
	first := demo.Conversations.Edges[0].Node
	require.Contains(t, first.Turns.Edges[0].Node.Answer, "2,460")
	require.Equal(t, "calculator", first.Turns.Edges[0].Node.ToolCalls[0].Name)

	// Its model calls carry estimated tokens and a list price.
	var u struct {
		Estimated bool `json:"estimated"`
		Totals    struct {
			InputTokens  int64 `json:"inputTokens"`
			OutputTokens int64 `json:"outputTokens"`
			Cost         struct {
				Micros int64 `json:"micros"`
			} `json:"cost"`
		} `json:"totals"`
		ByModel []struct {
			Model     string `json:"model"`
			Estimated bool   `json:"estimated"`
		} `json:"byModel"`
	}
	require.NoError(t, json.Unmarshal(query(`{ usage { estimated totals { inputTokens outputTokens cost { micros } } byModel { model estimated } } }`).Data["usage"], &u))
	require.True(t, u.Estimated)
	require.Positive(t, u.Totals.InputTokens)
	require.Positive(t, u.Totals.OutputTokens)
	require.Positive(t, u.Totals.Cost.Micros)
	require.Len(t, u.ByModel, 1)
	require.Equal(t, "replay", u.ByModel[0].Model)
	require.True(t, u.ByModel[0].Estimated)

	ids := map[string]string{}
	subst := func(op string) string {
		for k, v := range ids {
			op = strings.ReplaceAll(op, k, v)
		}
		require.NotRegexp(t, `[A-Z]+_ID`, op, "every placeholder has a value")
		return op
	}
	heard := false
	for _, op := range quick {
		op = subst(op)
		if strings.HasPrefix(op, "subscription") {
			res := post(op, "text/event-stream")
			kinds, answerText := readEvents(t, res)
			require.Contains(t, kinds, "TOOL_CALL_FINISHED", "the subscription hears the calculator")
			require.Contains(t, kinds, "TEXT_DELTA", "and the answer stream")
			require.Contains(t, answerText, "0.666666666667", "2/3 through the calculator")
			heard = true
			continue
		}
		a := query(op)
		switch {
		case strings.Contains(op, "createAgent("):
			ids["AGENT_ID"] = id(a, "createAgent")
		case strings.Contains(op, "startConversation("):
			ids["CONVERSATION_ID"] = id(a, "startConversation")
		case strings.Contains(op, "sendMessage("):
			ids["TURN_ID"] = id(a, "sendMessage")
		}
	}
	require.True(t, heard, "the Quick start subscribes to its turn")

	ids["CONVERSATION_ID"] = first.ID
	ids["REF"] = first.Turns.Edges[0].Node.ToolCalls[0].Ref
	a := query(subst(runCode))
	var ran struct {
		Output string `json:"output"`
	}
	require.NoError(t, json.Unmarshal(a.Data["runCode"], &ran))
	require.Equal(t, "205", strings.TrimSpace(ran.Output), "runCode reads the demo's calculator result (2460 / 12)")
}

// readEvents reads a graphql-sse stream to its end and returns the kinds
// of the events heard and the last answer.
func readEvents(t *testing.T, res *http.Response) ([]string, string) {
	t.Helper()
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var kinds []string
	answer := ""
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "event: complete" {
			break
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || strings.TrimSpace(data) == "" {
			continue
		}
		var ev struct {
			Data struct {
				TurnEvents struct {
					Kind string `json:"kind"`
					Turn struct {
						Answer string `json:"answer"`
					} `json:"turn"`
				} `json:"turnEvents"`
			} `json:"data"`
			Errors []json.RawMessage `json:"errors"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &ev), data)
		require.Empty(t, ev.Errors, data)
		kinds = append(kinds, ev.Data.TurnEvents.Kind)
		if a := ev.Data.TurnEvents.Turn.Answer; a != "" {
			answer = a
		}
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return kinds, answer
}
