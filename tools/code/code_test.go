package code_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/db"
	"github.com/toolgate/toolgate/ent/db/dbtest"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/workspace"
)

func TestMain(m *testing.M) {
	// The sandbox's children are this test binary, re-executed.
	code.ServeChildIfAsked()
	goleak.VerifyTestMain(m)
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
	ctx := context.Background()
	c := d.Client()
	org := c.Organization.Create().SetName("Acme").SaveX(ctx)
	u := c.User.Create().SetOrganizationID(org.ID).SetName("Alice").SaveX(ctx)
	a := c.Agent.Create().SetOrganizationID(org.ID).SetName("Helper").SaveX(ctx)
	b := &testBundle{client: c, turns: map[int]int{}, sandbox: code.New(os.Args[0])}
	for _, id := range []*int{&b.conv, &b.other} {
		conv := c.Conversation.Create().SetOrganizationID(org.ID).SetUserID(u.ID).SetAgentID(a.ID).SaveX(ctx)
		*id = conv.ID
		b.turns[conv.ID] = c.Turn.Create().SetConversationID(conv.ID).SetNumber(1).SetUserText("hi").SaveX(ctx).ID
	}
	return b
}

// stored is a tool result to seed, with its call.
type stored struct {
	conv      int // b.conv when zero
	ref       string
	content   string
	outcome   toolcall.Outcome
	truncated bool
}

func (b *testBundle) store(t testing.TB, s stored) {
	t.Helper()
	ctx := context.Background()
	if s.conv == 0 {
		s.conv = b.conv
	}
	if s.outcome == "" {
		s.outcome = toolcall.OutcomeHITS
	}
	sr := b.client.StoredResult.Create().SetConversationID(s.conv).SetRef(s.ref).SetKind(storedresult.KindJSON).
		SetContent([]byte(s.content)).SetChars(int64(len([]rune(s.content)))).SetBytes(int64(len(s.content))).SetItems(1).
		SetTruncatedAtSource(s.truncated).SaveX(ctx)
	b.calls++
	b.client.ToolCall.Create().SetTurnID(b.turns[s.conv]).SetPosition(b.calls).SetName("research_web").
		SetOutcome(s.outcome).SetRef(s.ref).SetResultID(sr.ID).SaveX(ctx)
}

func (b *testBundle) run(t testing.TB, src string, refs ...string) (*code.Result, error) {
	t.Helper()
	return b.sandbox.Run(context.Background(), b.client, b.conv, code.Input{
		Code: src, ToolResults: refs, Now: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC),
	})
}

func (b *testBundle) files(t testing.TB) map[string]string {
	t.Helper()
	ws := workspace.New(b.client, b.conv)
	l, err := ws.List(context.Background(), nil)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range l.Files {
		text, err := ws.Text(context.Background(), f.Path)
		require.NoError(t, err)
		out[f.Path] = text
	}
	return out
}

func TestRunSmoke(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		b.store(t, stored{ref: "r1", content: `{"rows":[{"n":1},{"n":2},{"n":39}]}`})
		res, err := b.run(t, `const d = JSON.parse(toolResults[0]); console.log(d.rows.reduce((s, r) => s + r.n, 0)); console.log(new Date().toISOString())`, "r1")
		require.NoError(t, err)
		require.Equal(t, "42\n2026-03-01T09:30:00.000Z\n", res.Output)
		_, err = b.run(t, `'x'.repeat(2**30).length`)
		var refusal *tools.Refusal
		require.ErrorAs(t, err, &refusal)
		require.Contains(t, err.Error(), "memory bound")
		_ = strings.Contains
	})
}
