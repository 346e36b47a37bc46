package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/graph/browsertest"
	"github.com/toolgate/toolgate/runtime/model/replay"
)

// TestConsoleShowsTheAnswerLive: `serve --demo` with a paced replay
// script, and the admin console's transcript open in headless Chromium
// while a turn runs: the running turn shows its answer growing, each view
// of it the start of the answer the turn then stores, and once the turn
// ends the transcript shows the stored answer and nothing live.
func TestConsoleShowsTheAnswerLive(t *testing.T) {
	t.Parallel()
	exe := browsertest.Find(t)
	answer := strings.TrimSpace(strings.Repeat("Each piece of this answer reaches the console while the model writes it. ", 16))
	script, err := json.Marshal(replay.Script{Entries: []replay.Entry{{Steps: []replay.Step{{Text: answer}}}}})
	require.NoError(t, err)
	dir := t.TempDir()
	scriptPath := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(scriptPath, script, 0o600))

	ctx, stop := context.WithCancel(context.Background())
	var out, logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--demo", "--addr", "127.0.0.1:0", "--database-url", "sqlite://" + filepath.Join(dir, "t.db"),
			"--model-provider", "replay", "--replay-script", scriptPath, "--replay-pace", "40ms"}, &out, &logs)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("server did not stop")
		}
	})
	base := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/`)
	token := regexp.MustCompile(`(?:demo token: |#token=)([A-Za-z0-9_\-.]+)`)
	require.Eventually(t, func() bool {
		return base.MatchString(out.String()) && token.MatchString(out.String())
	}, 30*time.Second, 20*time.Millisecond, "no banner; logs:\n%s", logs.String())
	api := base.FindStringSubmatch(out.String())[1]
	tok := token.FindStringSubmatch(out.String())[1]

	// The load benchmarks' client: a POST with the demo token, no errors.
	srv := &benchServer{base: api, token: tok}
	gql := func(query string, vars map[string]any) map[string]any { return srv.gql(t, query, vars) }
	// The demo's conversation, once its first turn is over.
	var conv string
	require.Eventually(t, func() bool {
		d := gql(`{ conversations(first: 1) { edges { node { id turns(last: 1) { edges { node { status } } } } } } }`, nil)
		edges := d["conversations"].(map[string]any)["edges"].([]any)
		if len(edges) == 0 {
			return false
		}
		node := edges[0].(map[string]any)["node"].(map[string]any)
		conv = node["id"].(string)
		turns := node["turns"].(map[string]any)["edges"].([]any)
		return len(turns) == 0 || turns[0].(map[string]any)["node"].(map[string]any)["status"] != "RUNNING"
	}, 60*time.Second, 100*time.Millisecond)

	origin, err := url.Parse(api)
	require.NoError(t, err)
	bctx := browsertest.Start(t, exe, origin.Hostname(), 90*time.Second, nil)
	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(api+"/admin#token="+tok)))
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(`#nav-turns`)))

	sent := gql(`mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "Tell me about streaming."}) { id status } }`, map[string]any{"c": conv})
	turnID := sent["sendMessage"].(map[string]any)["id"].(string)
	require.NoError(t, chromedp.Do(bctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/conversations/' + encodeURIComponent(%q)`, conv))))

	// What the live bubble shows, without its "Writing (step n)" label;
	// null when there is none.
	const live = `(() => {
	  const b = document.querySelector('.bubble.answer.live');
	  if (!b) return null;
	  return Array.from(b.childNodes).filter((n) => !(n.classList && n.classList.contains('who'))).map((n) => n.textContent).join('');
	})()`
	var seen []string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		text, err := chromedp.Run(bctx, chromedp.Evaluate[*string](live))
		require.NoError(t, err)
		if text != nil && *text != "" && (len(seen) == 0 || seen[len(seen)-1] != *text) {
			seen = append(seen, *text)
		}
		d := gql(`query($id: ID!) { node(id: $id) { ... on Turn { status } } }`, map[string]any{"id": turnID})
		if d["node"].(map[string]any)["status"] != "RUNNING" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.GreaterOrEqual(t, len(seen), 2, "the answer grew in the console while the turn ran")
	t.Logf("the console showed %d lengths of the answer while it ran, the first %d of %d characters", len(seen), len(seen[0]), len(answer))
	for _, s := range seen {
		require.True(t, strings.HasPrefix(answer, s), "what the console showed live is the start of the answer: %q", s)
	}
	require.Less(t, len(seen[0]), len(answer), "shown before it was whole")

	// The turn over, the transcript reloads: the stored answer, nothing live.
	require.Eventually(t, func() bool {
		got, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector('.bubble.answer.live') === null &&
		  Array.from(document.querySelectorAll('.bubble.answer')).some((b) => b.textContent.includes(`+jsQuote(answer)+`))`))
		return err == nil && got
	}, 30*time.Second, 100*time.Millisecond, "the stored answer replaces the live one")
}

func jsQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
