package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model/replay"
)

// TestLoadPrintsTheTable reads a seeded transcript through a real server
// and with plain SQL, briefly, and wants a row per scenario and
// concurrency, none with errors.
func TestLoadPrintsTheTable(t *testing.T) {
	url, api, token, conv := serve(t)

	var out bytes.Buffer
	require.NoError(t, run([]string{"-url", api, "-token", token, "-conversation", conv,
		"-clients", "1,2", "-turn-clients", "", "-duration", "1s", "-warmup", "200ms", "-database-url", url}, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 5, out.String())
	require.Regexp(t, `what +clients +requests +req/s +p50 +p99 +errors`, lines[0])
	for i, want := range []string{"transcript +1 ", "transcript +2 ", "same rows, plain SQL +1 ", "same rows, plain SQL +2 "} {
		require.Regexp(t, `^ *`+want+` *[1-9][0-9]* +[0-9.]+ +[0-9.]+ ms +[0-9.]+ ms +0$`, lines[i+1])
	}
}

// TestReplayScriptLoads checks that the printed script is one the server's
// replay provider takes.
func TestReplayScriptLoads(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-print-replay"}, &out))
	path := filepath.Join(t.TempDir(), "load.json")
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o600))
	_, err := replay.Load(path)
	require.NoError(t, err)
	require.Equal(t, 5, strings.Count(out.String(), `"calculator"`))
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		give []string
		want string
	}{
		{give: []string{"-clients", "0"}, want: `-clients: "0" is not a count of clients`},
		{give: []string{"-turn-clients", "x"}, want: `-turn-clients: "x" is not a count of clients`},
	}
	for _, tt := range tests {
		require.EqualError(t, run(tt.give, &bytes.Buffer{}), tt.want)
	}
}

// serve starts a server on a fresh PostgreSQL database with a seeded
// conversation of 3 turns × 2 tool calls, and returns the database's URL,
// the server's GraphQL endpoint, a token of the conversation's owner and
// the conversation's id.
func serve(t *testing.T) (databaseURL, api, token, conv string) {
	t.Helper()
	url := dbtest.URL(t, dbtest.Postgres)
	ctx := context.Background()
	d, err := db.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Migrate(ctx))
	srv := httptest.NewServer(graph.NewServer(graph.Config{DB: d}))
	t.Cleanup(srv.Close)
	grant, err := auth.Bootstrap(ctx, d.Client(), "Acme", "Alice", "Research")
	require.NoError(t, err)
	return url, srv.URL + "/graphql", grant.Token, gid.Encode(seed(t, d, grant, 3, 2))
}

// seed makes a conversation of turns, each with calls tool calls that
// stored a result and one model call, and returns its id.
func seed(t *testing.T, d *db.DB, g *auth.Grant, turns, calls int) int {
	t.Helper()
	ctx := tenancy.System(context.Background())
	c := d.Client()
	a := c.Agent.Create().SetOrganizationID(g.OrganizationID).SetName("Helper").SaveX(ctx)
	conv := c.Conversation.Create().SetOrganizationID(g.OrganizationID).SetUserID(g.UserID).SetAgentID(a.ID).SaveX(ctx)
	for n := 1; n <= turns; n++ {
		tu := c.Turn.Create().SetConversationID(conv.ID).SetNumber(n).SetUserText(fmt.Sprintf("question %d", n)).
			SetAnswer("answer").SetStatus("COMPLETED").SaveX(ctx)
		c.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(g.OrganizationID).SetAgentID(a.ID).SetUserID(g.UserID).
			SetStep(0).SetProvider("openai").SetModel("gpt-4.1").ExecX(ctx)
		for i := range calls {
			r := c.StoredResult.Create().SetConversationID(conv.ID).SetRef(fmt.Sprintf("r-%d-%d", n, i)).
				SetKind(schematype.KindJSON).SetContent([]byte(`{}`)).SetChars(2).SetBytes(2).SetItems(1).SaveX(ctx)
			c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(i).SetName("calculator").SetArguments(`{"expression":"1+1"}`).
				SetOutcome(schematype.OutcomeHits).SetAttempts(1).SetRef(r.Ref).SetResultID(r.ID).ExecX(ctx)
		}
	}
	return conv.ID
}
