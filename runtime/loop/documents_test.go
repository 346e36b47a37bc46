package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/attachment"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/tools/embed"
)

// TestDocumentToolsOfferedWhen: each turn fixes the Documents family's
// tools from what holds when it starts: knowledge_search when the agent
// binds knowledge and an embedding model is configured, read_document when
// it binds knowledge or the conversation holds a readable attachment,
// search_attachments when the conversation holds an attachment and an
// embedding model is configured.
func TestDocumentToolsOfferedWhen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		embeddings bool
		knowledge  bool
		attachment string // the attachment's status; "" for none
		want       []string
	}{
		{name: "nothing to reach", embeddings: true, want: nil},
		{name: "knowledge", embeddings: true, knowledge: true, want: []string{"knowledge_search", "read_document"}},
		{name: "knowledge, no embedding model", knowledge: true, want: []string{"read_document"}},
		{name: "an attachment", embeddings: true, attachment: "READY", want: []string{"read_document", "search_attachments"}},
		{name: "an attachment, no embedding model", attachment: "PROCESSING", want: []string{"read_document"}},
		{name: "an unreadable attachment", embeddings: true, attachment: "FAILED", want: []string{"search_attachments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := tenancy.System(context.Background())
			p := &scripted{answers: []model.Response{{Text: "Done."}}}
			h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p, func(c *loop.Config) { c.Embeddings = tt.embeddings })
			conv := h.conversation(t, "knowledge_search", "read_document", "search_attachments")
			convID, err := gid.Decode(conv)
			require.NoError(t, err)
			c := h.client.Conversation.GetX(ctx, convID)
			if tt.knowledge {
				kb := h.client.KnowledgeBase.Create().SetOrganizationID(c.OrganizationID).SetName("Handbook").SaveX(ctx)
				h.client.Agent.UpdateOneID(c.AgentID).SetKnowledgeBaseIds([]int{kb.ID}).ExecX(ctx)
			}
			if tt.attachment != "" {
				h.client.Attachment.Create().SetOrganizationID(c.OrganizationID).SetConversationID(c.ID).
					SetFilename("notes.txt").SetStatus(attachment.Status(tt.attachment)).SaveX(ctx)
			}
			id := h.send(t, conv, "what do the files say?", "")
			require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
			var got []string
			for _, s := range p.request(0).Tools {
				switch s.Name {
				case "knowledge_search", "read_document", "search_attachments":
					got = append(got, s.Name)
				}
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// embeddingsDown is an OpenAI-compatible /v1/embeddings endpoint that is
// down: it counts the requests and the inputs they carried, and answers
// each 503.
type embeddingsDown struct {
	mu     sync.Mutex
	inputs [][]string
}

func (f *embeddingsDown) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input []string `json:"input"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	f.inputs = append(f.inputs, req.Input)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `{"error":{"message":"embedding backend is down","type":"server_error"}}`)
}

func (f *embeddingsDown) sent() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.inputs)
}

// TestEmbeddingOutageTellsItsAttempts: with the embedding endpoint down,
// knowledge_search and memory_write are outages that report the attempts
// made (the embedder's retries, through the runtime's retry loop as the
// server wires it), stored on the call and heard by the model.
func TestEmbeddingOutageTellsItsAttempts(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		fake := &embeddingsDown{}
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		e, err := embed.New(embed.Config{Provider: embed.ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "test", Model: "bge-small",
			Middleware: model.Middleware,
			Retry: func(ctx context.Context, call func(context.Context) error) error {
				_, err := model.Call(ctx, retry.Policy{Sleep: retry.NoWait}, "embeddings", func(ctx context.Context) (struct{}, error) {
					return struct{}{}, call(ctx)
				})
				return err
			}})
		require.NoError(t, err)
		p := &scripted{answers: []model.Response{
			{ToolCalls: []model.ToolCall{call("k", "knowledge_search", `{"queries":["travel policy","expense deadline"]}`)}},
			{ToolCalls: []model.ToolCall{call("m", "memory_write", `{"facts":[{"text":"Prefers answers in French."}]}`)}},
			{Text: "The search could not be done."},
		}}
		h := newHarnessWith(t, d, p, e)
		conv := h.conversation(t, "knowledge_search", "memory_write")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		c := h.client.Conversation.GetX(ctx, convID)
		kb := h.client.KnowledgeBase.Create().SetOrganizationID(c.OrganizationID).SetName("Handbook").SaveX(ctx)
		h.client.Agent.UpdateOneID(c.AgentID).SetKnowledgeBaseIds([]int{kb.ID}).SetMemory(true).ExecX(ctx)
		id := h.send(t, conv, "what is the travel policy?", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

		// The two queries in one request, four times; then each alone, once.
		both := []string{"travel policy", "expense deadline"}
		require.Equal(t, [][]string{both, both, both, both, {"expense deadline"}, {"travel policy"}, {"Prefers answers in French."}, {"Prefers answers in French."}, {"Prefers answers in French."}, {"Prefers answers in French."}},
			sortTail(fake.sent(), 4, 6))
		calls := h.calls(t, id)
		require.Len(t, calls, 2)
		for i, want := range []int{4 + 1, 4} {
			c := calls[i]
			require.Equal(t, schematype.OutcomeOutage, c.Outcome, *c.Heard)
			require.Equal(t, want, c.Attempts, c.Name)
			heard := lastTool(p.request(i + 1)).Text
			require.Equal(t, *c.Heard, heard)
			require.True(t, strings.HasSuffix(heard, fmt.Sprintf("\n[gave up after %d attempts]", want)), heard)
			for _, f := range c.Failures {
				require.Equal(t, schematype.FailureOutage, f.Kind)
			}
		}
	})
}

// sortTail sorts the requests from..to, which were sent concurrently.
func sortTail(reqs [][]string, from, to int) [][]string {
	if len(reqs) >= to {
		slices.SortFunc(reqs[from:to], func(a, b []string) int { return strings.Compare(strings.Join(a, "\n"), strings.Join(b, "\n")) })
	}
	return reqs
}
