package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/artifactversion"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/workspacefile"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/model/openai"
	"github.com/toolgate/toolgate/tools/artifact/browser"
)

// reviewBrowser is the one browser of this test binary, started on first
// use; nil when none is installed (the review tools are then not offered).
var reviewBrowser = sync.OnceValue(func() *browser.Pool {
	exe, err := browser.Find()
	if err != nil {
		return nil
	}
	return browser.New(exe, 2, time.Minute)
})

const deckOfThree = `<!doctype html><style>body{margin:0} section{width:1280px;height:720px;box-sizing:border-box;padding:40px}</style>` +
	`<section><h1>One</h1></section><section><h1>Two</h1></section><section><h1>Three</h1></section>`

// deckServer is an OpenAI-compatible endpoint that creates a deck, inspects
// it with the id the first call answered, then answers; it keeps the
// request bodies as the real SDK sent them.
func deckServer(t *testing.T) (*httptest.Server, func(int) string) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(raw))
		n := len(bodies)
		mu.Unlock()
		answer := func(content string, calls string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"stop",`+
				`"message":{"role":"assistant","content":%q,"tool_calls":%s}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`,
				n, content, calls)
		}
		switch n {
		case 1:
			args, _ := json.Marshal(map[string]string{"title": "Plan", "kind": "html", "content": deckOfThree})
			answer("", fmt.Sprintf(`[{"id":"call_1","type":"function","function":{"name":"create_artifact","arguments":%q}}]`, args))
		case 2:
			var body struct {
				Messages []struct {
					Role    string `json:"role"`
					Content any    `json:"content"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(raw, &body)
			var saved struct {
				ArtifactID string `json:"artifactId"`
			}
			last := body.Messages[len(body.Messages)-1]
			_ = json.Unmarshal([]byte(last.Content.(string)), &saved)
			answer("", fmt.Sprintf(`[{"id":"call_2","type":"function","function":{"name":"inspect_artifact","arguments":%q}}]`,
				`{"artifactId":"`+saved.ArtifactID+`"}`))
		default:
			answer("The deck looks right.", "null")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func(i int) string {
		mu.Lock()
		defer mu.Unlock()
		return bodies[i]
	}
}

// TestInspectionReachesTheModel: a real turn creates a 3-slide deck and
// inspects it in the real browser; the model's next call carries the 3 page
// images as image parts through the real OpenAI SDK, after the tool's text
// (its summary and the ref). A model that reads no images hears the same
// text and gets no image.
func TestInspectionReachesTheModel(t *testing.T) {
	t.Parallel()
	if reviewBrowser() == nil {
		t.Skip("no headless browser: install Chromium (.ci/run does) or set TOOLGATE_BROWSER")
	}
	each(t, func(t *testing.T, d *db.DB) {
		for _, tt := range []struct {
			name     string
			textOnly bool
		}{{"images", false}, {"text only", true}} {
			t.Run(tt.name, func(t *testing.T) {
				srv, body := deckServer(t)
				p, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1", APIKey: "k", HTTPClient: srv.Client(), DisableStreaming: true, TextOnly: tt.textOnly})
				require.NoError(t, err)
				h := newHarness(t, d, p)
				conv := h.conversation(t, "create_artifact")
				id := h.send(t, conv, "Make me a three-slide deck.", "")
				got := waitLong(t, h, id)
				require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

				calls := h.calls(t, id)
				require.Len(t, calls, 2)
				require.Equal(t, schematype.OutcomeHits, calls[1].Outcome, *calls[1].Heard)
				heard := *calls[1].Heard
				require.Contains(t, heard, "renders to 3 pages")
				require.Contains(t, heard, "[3 image(s), ")
				require.Contains(t, heard, "stored as ref "+*calls[1].Ref)
				require.NotContains(t, heard, "/9j/", "no image data in the words")

				third := body(2)
				var sent struct {
					Messages []struct {
						Role    string          `json:"role"`
						Content json.RawMessage `json:"content"`
					} `json:"messages"`
				}
				require.NoError(t, json.Unmarshal([]byte(third), &sent))
				images := strings.Count(third, `"type":"image_url"`)
				if tt.textOnly {
					require.Zero(t, images, tt.name)
					require.Equal(t, "tool", sent.Messages[len(sent.Messages)-1].Role)
					return
				}
				require.Equal(t, 3, images, tt.name)
				last := sent.Messages[len(sent.Messages)-1]
				require.Equal(t, "user", last.Role, "the images follow the tool messages")
				require.Contains(t, string(last.Content), "data:image/jpeg;base64,")
				require.Equal(t, "tool", sent.Messages[len(sent.Messages)-2].Role)

				// The stored result is non-text media; the version is inspected.
				sys := tenancy.System(context.Background())
				sr := h.client.StoredResult.GetX(sys, *calls[1].ResultID)
				require.Equal(t, "MEDIA", string(sr.Kind))
				convID, err := gid.Decode(conv)
				require.NoError(t, err)
				v := h.client.ArtifactVersion.Query().Where(artifactversion.ConversationID(convID)).OnlyX(sys)
				require.True(t, v.Inspected)
			})
		}
	})
}

// waitLong waits for a turn that renders in a browser on a busy machine.
func waitLong(t *testing.T, h *harness, turnID string) *ent.Turn {
	t.Helper()
	id, err := gid.Decode(turnID)
	require.NoError(t, err)
	var got *ent.Turn
	require.Eventually(t, func() bool {
		got = h.client.Turn.GetX(tenancy.System(context.Background()), id)
		return got.Status != turn.StatusRUNNING && !h.runner.Running(id)
	}, 3*time.Minute, 20*time.Millisecond)
	return got
}

// TestDraftIsNotSaved: visual files need inspection before saving. A real
// turn creates a deck; the model's print_pdf of the draft is refused, and
// its next request says what to do first; once it has inspected the
// version, the same call prints it into the workspace.
func TestDraftIsNotSaved(t *testing.T) {
	t.Parallel()
	if reviewBrowser() == nil {
		t.Skip("no headless browser: install Chromium (.ci/run does) or set TOOLGATE_BROWSER")
	}
	each(t, func(t *testing.T, d *db.DB) {
		create, err := json.Marshal(map[string]string{"title": "Plan", "kind": "html", "content": deckOfThree})
		require.NoError(t, err)
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("c", "create_artifact", string(create))}},
			{Text: "Drafted."},
		}}
		h := newHarness(t, d, p)
		conv := h.conversation(t, "create_artifact")
		first := h.send(t, conv, "Make me a three-slide deck.", "")
		require.Equal(t, turn.StatusCOMPLETED, waitLong(t, h, first).Status)
		var saved struct {
			ArtifactID string `json:"artifactId"`
			Draft      bool   `json:"draft"`
		}
		require.NoError(t, json.Unmarshal([]byte(lastTool(p.request(1)).Text), &saved))
		require.True(t, saved.Draft, "the write's answer says it saved a draft")

		print := call("p1", "print_pdf", `{"artifactId":"`+saved.ArtifactID+`","path":"deck.pdf"}`)
		p.mu.Lock()
		p.answers = []model.Response{
			{ToolCalls: []model.ToolCall{print}},
			{ToolCalls: []model.ToolCall{call("i", "inspect_artifact", `{"artifactId":"`+saved.ArtifactID+`"}`)}},
			{ToolCalls: []model.ToolCall{call("p2", "print_pdf", `{"artifactId":"`+saved.ArtifactID+`","path":"deck.pdf"}`)}},
			{Text: "Printed."},
		}
		p.mu.Unlock()
		second := h.send(t, conv, "Print it.", "")
		got := waitLong(t, h, second)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
		calls := h.calls(t, second)
		require.Len(t, calls, 3)
		require.Equal(t, schematype.OutcomeRefused, calls[0].Outcome, *calls[0].Heard)
		told := lastTool(p.request(3)).Text
		require.Contains(t, told, `version 1 of "Plan" is an uninspected draft, and visual files need inspection before saving: `+
			`call inspect_artifact on it, fix what you see, then print it`)
		require.Equal(t, schematype.OutcomeHits, calls[1].Outcome, *calls[1].Heard)
		require.Equal(t, schematype.OutcomeHits, calls[2].Outcome, *calls[2].Heard)
		require.Contains(t, lastTool(p.request(5)).Text, `"pages":3`)

		// Only the inspected version's PDF was written.
		sys := tenancy.System(context.Background())
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		files := h.client.WorkspaceFile.Query().Where(workspacefile.ConversationID(convID)).AllX(sys)
		require.Len(t, files, 1)
		require.Equal(t, "deck.pdf", files[0].Path)
		require.True(t, strings.HasPrefix(string(files[0].Data), "%PDF-"))
	})
}
