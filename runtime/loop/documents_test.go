package loop_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/attachment"
	"github.com/toolgate/toolgate/ent/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
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
