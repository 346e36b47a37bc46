package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/gid"
)

// TestLoneObjectsLoadWithoutWaiting reads the lists of one turn and of one
// conversation, each named alone (node(id:), conversation(id:)), from a
// server whose loaders would wait an hour for keys to batch with: every
// list is loaded at once, since nothing else in the document could join
// it. Before, each such list waited the loaders' 2 ms, twice when a tool
// call's result followed its turn's calls.
func TestLoneObjectsLoadWithoutWaiting(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "alone")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		seedTranscript(t, b.client, convID, 2, 3)
		ctx := tenancy.System(context.Background())
		tu := b.client.Turn.Query().Where(turn.ConversationID(convID), turn.Number(2)).OnlyX(ctx)
		b.client.Task.Create().SetConversationID(convID).SetPosition(0).SetTitle("plan").ExecX(ctx)
		b.client.Summary.Create().SetConversationID(convID).SetFromTurn(1).SetToTurn(1).SetText("so far").
			SetTurnID(tu.ID).SetModel("m").ExecX(ctx)

		srv := graph.NewServer(graph.Config{DB: d})
		graph.SetLoaderWait(srv, time.Hour)
		read := func(query string, vars map[string]any) string {
			t.Helper()
			body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
			require.NoError(t, err)
			done := make(chan *httptest.ResponseRecorder, 1)
			go func() {
				req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+b.alice.Token)
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				done <- w
			}()
			select {
			case w := <-done:
				require.Equal(t, http.StatusOK, w.Code, w.Body.String())
				require.NotContains(t, w.Body.String(), `"errors"`)
				return w.Body.String()
			case <-time.After(20 * time.Second):
				t.Fatalf("the read waited for its loaders: %s", query)
				return ""
			}
		}

		got := read(`query($id: ID!) { node(id: $id) { ... on Turn { number
			toolCalls { position result { ref chars } }
			modelCalls { step } promptStats { modelCalls }
			pendingApprovals { id } myRating { rating } ratings { rating } } } }`,
			map[string]any{"id": gid.Encode(tu.ID)})
		require.Contains(t, got, `"toolCalls":[{"position":0,"result":{"ref":`)
		require.Contains(t, got, `"modelCalls":[{"step":0},{"step":1}]`)

		got = read(`query($id: ID!) { conversation(id: $id) { title tasks { title } summaries { text } attachments { id } } }`,
			map[string]any{"id": conv})
		require.Contains(t, got, `"tasks":[{"title":"plan"}]`)
		require.Contains(t, got, `"summaries":[{"text":"so far"}]`)
	})
}
