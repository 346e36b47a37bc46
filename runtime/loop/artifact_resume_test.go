package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/anthropic"
	"github.com/toolgate/toolgate/runtime/model/openai"
)

// artifactIDIn finds the artifact id create_artifact answered, in a
// request body where the tool's JSON is itself a JSON string.
var artifactIDIn = regexp.MustCompile(`artifactId\\*"\s*:\s*\\*"(tg[0-9a-z]+)`)

// dyingDeck is a provider endpoint, in the wire protocol of openai or
// anthropic, that creates a 3-slide deck, inspects it, and at its third
// request (the one that carries the page images) calls die before it
// answers: the process running the turn dies there. Its fourth request,
// the resumed turn's, is answered. It keeps the request bodies.
type dyingDeck struct {
	wire string
	die  func()

	mu     sync.Mutex
	bodies []string
}

func (s *dyingDeck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(raw))
	n := len(s.bodies)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	var call, args string
	switch n {
	case 1:
		a, _ := json.Marshal(map[string]string{"title": "Plan", "kind": "html", "content": deckOfThree})
		call, args = "create_artifact", string(a)
	case 2:
		m := artifactIDIn.FindStringSubmatch(string(raw))
		if m == nil {
			http.Error(w, "no artifact id in the request", http.StatusBadRequest)
			return
		}
		call, args = "inspect_artifact", `{"artifactId":"`+m[1]+`"}`
	case 3:
		s.die()
	}
	text := "The deck looks right."
	if n == 3 {
		text = "An answer nobody records."
	}
	switch {
	case s.wire == "anthropic" && call != "":
		fmt.Fprintf(w, `{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_%d","name":%q,"input":%s}],`+
			`"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}`, n, n, call, args)
	case s.wire == "anthropic":
		fmt.Fprintf(w, `{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%q}],`+
			`"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`, n, text)
	case call != "":
		fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"tool_calls",`+
			`"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_%d","type":"function","function":{"name":%q,"arguments":%q}}]}}],`+
			`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, n, n, call, args)
	default:
		fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"stop",`+
			`"message":{"role":"assistant","content":%q}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, n, text)
	}
}

func (s *dyingDeck) body(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[i]
}

func (s *dyingDeck) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// sentImages returns the images a request body carries, base64, in
// order: OpenAI's image_url data URLs, Anthropic's base64 image sources.
func sentImages(t *testing.T, body string) []string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if u, ok := x["url"].(string); ok && strings.HasPrefix(u, "data:image/") {
				out = append(out, u[strings.Index(u, ",")+1:])
			}
			if x["type"] == "base64" && strings.HasPrefix(fmt.Sprint(x["media_type"]), "image/") {
				out = append(out, x["data"].(string))
			}
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// TestResumedTurnResendsItsImages: a turn inspects a deck in the real
// browser; its process dies after the inspection was recorded, during the
// model call that carried the page images. The turn, resumed, sends the
// model the same images again, through each provider's real SDK, in the
// same messages as the first time.
func TestResumedTurnResendsItsImages(t *testing.T) {
	t.Parallel()
	if reviewBrowser() == nil {
		t.Skip("no headless browser: install Chromium (.ci/run does) or set TOOLGATE_BROWSER")
	}
	for _, wire := range []string{"openai", "anthropic"} {
		t.Run(wire, func(t *testing.T) {
			each(t, func(t *testing.T, d *db.DB) {
				srv := &dyingDeck{wire: wire}
				ts := httptest.NewServer(srv)
				t.Cleanup(ts.Close)
				var p model.Provider
				var err error
				if wire == "openai" {
					p, err = openai.New(openai.Options{BaseURL: ts.URL + "/v1", APIKey: "k", HTTPClient: ts.Client(), DisableStreaming: true})
				} else {
					p, err = anthropic.New(anthropic.Options{BaseURL: ts.URL, APIKey: "k", HTTPClient: ts.Client()})
				}
				require.NoError(t, err)
				h := newHarness(t, d, p)
				sys := tenancy.System(context.Background())
				var dying atomic.Int64 // the turn's id, once sent
				srv.die = func() {
					// The process dies: it stops beating and never writes
					// again; its claim is left to go stale.
					h.client.Turn.UpdateOneID(int(dying.Load())).SetClaimedBy("r_dead").
						SetHeartbeatAt(h.now.Add(-loop.StaleAfter - time.Second)).ExecX(sys)
				}
				conv := h.conversation(t, "create_artifact")
				id := h.send(t, conv, "Make me a three-slide deck.", "")
				turnID, err := gid.Decode(id)
				require.NoError(t, err)
				dying.Store(int64(turnID))

				// The third call was made and its answer dropped: the turn
				// is left RUNNING with two steps recorded, the inspection's
				// result among them.
				require.Eventually(t, func() bool { return srv.count() >= 3 && !h.runner.Running(turnID) }, 3*time.Minute, 20*time.Millisecond)
				left := h.client.Turn.GetX(sys, turnID)
				require.Equal(t, turn.StatusRUNNING, left.Status)
				require.Equal(t, 2, h.client.ModelCall.Query().Where(modelcall.TurnID(turnID), modelcall.KindEQ(modelcall.KindSTEP)).CountX(sys))
				calls := h.calls(t, id)
				require.Len(t, calls, 2)
				require.Equal(t, "inspect_artifact", calls[1].Name)
				require.NotNil(t, calls[1].ResultID, "the inspection's images are stored")
				first := sentImages(t, srv.body(2))
				require.Len(t, first, 3, "the first run sent the 3 page images")

				n, err := h.runner.Resume(context.Background())
				require.NoError(t, err)
				require.Equal(t, 1, n)
				got := waitLong(t, h, id)
				require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
				require.Equal(t, "The deck looks right.", *got.Answer)
				require.Equal(t, 4, srv.count(), "the model is asked once more, for the step not recorded")

				resumed := srv.body(3)
				require.Equal(t, first, sentImages(t, resumed), "the resumed turn sends the same images, in order")
				var before, after struct {
					Messages json.RawMessage `json:"messages"`
				}
				require.NoError(t, json.Unmarshal([]byte(srv.body(2)), &before))
				require.NoError(t, json.Unmarshal([]byte(resumed), &after))
				require.JSONEq(t, string(before.Messages), string(after.Messages), "the same messages, images where they were")
			})
		})
	}
}
