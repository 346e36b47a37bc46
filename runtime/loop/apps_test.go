package loop_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
)

// crm is an MCP application built with the SDK's own server side.
func crm(t *testing.T) string {
	server := sdk.NewServer(&sdk.Implementation{Name: "crm", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`)
	server.AddTool(&sdk.Tool{Name: "lookup", Description: "Find a contact by name.", InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var args struct{ Name string }
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Ada Lovelace, ada@example.com"}}}, nil
		})
	server.AddTool(&sdk.Tool{Name: "export", Description: "Every contact, as JSON text.", InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"contacts": [{"name": "Ada", "email": "ada@example.com"}]}`}}}, nil
		})
	server.AddTool(&sdk.Tool{Name: "dump", Description: "A raw record, control characters and all.", InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: nulRecord}}}, nil
		})
	server.AddTool(&sdk.Tool{Name: "purge", Description: "Delete every contact.", InputSchema: schema},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			t.Error("purge is not allowed and must never run")
			return nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestApplicationToolsAreOfferedAndRun(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{
		{ToolCalls: []model.ToolCall{
			call("a", "crm__lookup", `{"name": "Ada"}`),
			call("b", "crm__purge", `{"name": "*"}`),
		}},
		{Text: "Ada's address is ada@example.com."},
	}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	url := crm(t)
	h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "crm", url: $u, allowedTools: ["lookup", "purge"]}) { id } }`,
		map[string]any{"u": url})
	conv := h.conversation(t, "crm__lookup", "crm__purge")
	// The application stops allowing purge after the agent listed it.
	h.client.Application.Update().SetAllowedTools([]string{"lookup"}).ExecX(tenancy.System(context.Background()))
	id := h.send(t, conv, "Find Ada's email", "")
	got := h.wait(t, id)
	require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)

	// Offered with the server's own schema; the tool not allowed by the
	// application is not offered even though the agent lists it.
	var offered []model.ToolSpec
	for _, s := range p.request(0).Tools {
		if s.Name == "crm__lookup" || s.Name == "crm__purge" {
			offered = append(offered, s)
		}
	}
	require.Len(t, offered, 1)
	require.Equal(t, "crm__lookup", offered[0].Name)
	require.JSONEq(t, `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`, string(offered[0].Schema))

	calls := h.calls(t, id)
	require.Equal(t, schematype.OutcomeHits, calls[0].Outcome)
	require.Contains(t, *calls[0].Heard, "ada@example.com")
	require.Equal(t, schematype.OutcomeRefused, calls[1].Outcome)
	require.Equal(t, `tool "crm__purge" is not available`, *calls[1].Message)
}

// An application tool that answers JSON as text is stored and previewed as
// JSON, not as text with the JSON escaped inside it.
func TestApplicationJSONTextIsJSON(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{
		{ToolCalls: []model.ToolCall{call("a", "crm__export", `{"name": "all"}`)}},
		{Text: "One contact."},
	}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "crm", url: $u, allowedTools: ["export"]}) { id } }`,
		map[string]any{"u": crm(t)})
	id := h.send(t, h.conversation(t, "crm__export"), "Export the contacts", "")
	got := h.wait(t, id)
	require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
	calls := h.calls(t, id)
	require.Equal(t, schematype.OutcomeHits, calls[0].Outcome)
	res := calls[0].QueryResult().OnlyX(tenancy.System(context.Background()))
	require.Equal(t, schematype.KindJSON, res.Kind)
	require.Contains(t, *calls[0].Heard, `"email": "ada@example.com"`)
	require.NotContains(t, *calls[0].Heard, `\"`, "heard as JSON, not as escaped text")
}

func TestResumeRunsTurnsLeftRunning(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{{Text: "Picked up where we left off."}}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	conv := h.conversation(t)
	convID, err := gid.Decode(conv)
	require.NoError(t, err)
	// A turn a previous process left RUNNING.
	tu := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("hello").SetStartedAt(h.now).SaveX(tenancy.System(context.Background()))
	n, err := h.runner.Resume(tenancy.System(context.Background()))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got := h.wait(t, gid.Encode(tu.ID))
	require.Equal(t, turn.StatusCOMPLETED, got.Status)
	require.Equal(t, "Picked up where we left off.", *got.Answer)
}

func TestResumeClaimsOnlyAbandonedTurnsOnce(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := &scripted{answers: []model.Response{{Text: "resumed"}}}
		h := newHarness(t, d, p)
		// A second replica over the same database, with metrics of its own.
		cfg := h.cfg
		cfg.Registerer = prometheus.NewRegistry()
		other, err := loop.New(cfg)
		require.NoError(t, err)
		require.NoError(t, other.Open())
		t.Cleanup(func() { _ = other.Close(context.Background()) })
		conv := h.conversation(t)
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		ctx := tenancy.System(context.Background())
		mk := func(n int, beat time.Time) int {
			return h.client.Turn.Create().SetConversationID(convID).SetNumber(n).SetUserText("x").
				SetStartedAt(h.now).SetHeartbeatAt(beat).SaveX(ctx).ID
		}
		live := mk(1, h.now.Add(-loop.StaleAfter/2)) // its process still beats
		_ = live
		n, err := h.runner.Resume(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "a turn another process runs is left alone")

		h.client.Turn.Delete().ExecX(ctx)
		stale := mk(1, h.now.Add(-loop.StaleAfter-time.Second))
		var wg sync.WaitGroup
		counts := make([]int, 2)
		for i, r := range []*loop.Runner{h.runner, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i], _ = r.Resume(ctx)
			}()
		}
		wg.Wait()
		require.Equal(t, 1, counts[0]+counts[1], "exactly one replica takes it")
		got := h.wait(t, gid.Encode(stale))
		require.Equal(t, turn.StatusCOMPLETED, got.Status)
	})
}

func TestResumeClosesCallsLeftInFlight(t *testing.T) {
	t.Parallel()
	p := &scripted{answers: []model.Response{{Text: "I'll check before writing again."}}}
	h := newHarness(t, dbtest.Open(t, dbtest.SQLite), p)
	conv := h.conversation(t)
	convID, err := gid.Decode(conv)
	require.NoError(t, err)
	ctx := tenancy.System(context.Background())
	// A process stopped after the model asked for a write and before the
	// write answered.
	tu := h.client.Turn.Create().SetConversationID(convID).SetNumber(1).SetUserText("save it").SetStartedAt(h.now).SaveX(ctx)
	h.client.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(h.grant.OrganizationID).SetAgentID(1).SetUserID(h.grant.UserID).
		SetStep(0).SetProvider("scripted").SetModel("gpt-4.1").ExecX(ctx)
	h.client.ToolCall.Create().SetTurnID(tu.ID).SetPosition(0).SetStep(0).SetCallID("w1").SetName("write_file").
		SetArguments(`{"files":[{"path":"a.txt","content":"x"}]}`).ExecX(ctx)
	_, err = h.runner.Resume(ctx)
	require.NoError(t, err)
	got := h.wait(t, gid.Encode(tu.ID))
	require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
	c := h.calls(t, gid.Encode(tu.ID))[0]
	require.Equal(t, schematype.OutcomeMayHaveRun, c.Outcome)
	require.Contains(t, *c.Message, "interrupted")
	// The model heard it, paired with the call it asked for.
	heard := lastTool(p.request(0))
	require.Equal(t, "w1", heard.ToolCallID)
	require.Contains(t, heard.Text, "May or may not have run")
	require.Contains(t, heard.Text, "interrupted")
	require.True(t, heard.IsError)
}
