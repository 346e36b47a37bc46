package loop_test

import (
	"bytes"
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

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/approval"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/model"
)

const refundSchema = `{"type":"object","properties":{"orders":{"type":"array","items":{"type":"string"}},"amount":{"type":"number"}},` +
	`"required":["orders","amount"],"additionalProperties":false}`

// shop is an MCP application (the SDK's own server side) with a read-only
// lookup and a refund whose server says destructiveHint: true. It records
// every refund it is sent.
type shop struct {
	url     string
	mu      sync.Mutex
	refunds []string
}

func newShop(t *testing.T) *shop {
	s := &shop{}
	server := sdk.NewServer(&sdk.Implementation{Name: "shop", Version: "1"}, nil)
	server.AddTool(&sdk.Tool{Name: "lookup", Description: "Find an order.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"]}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "order A1: 12.50 EUR, paid"}}}, nil
		})
	destructive := true
	server.AddTool(&sdk.Tool{Name: "refund", Description: "Refund orders to the customer's card.",
		InputSchema: json.RawMessage(refundSchema), Annotations: &sdk.ToolAnnotations{DestructiveHint: &destructive}},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.mu.Lock()
			s.refunds = append(s.refunds, string(req.Params.Arguments))
			s.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "refunded"}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *shop) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refunds...)
}

// approvalTurn registers the shop, starts a conversation whose agent may
// look orders up and refund them, and sends a message whose first model
// answer is a batch of three calls: a lookup, a refund (its orders sent
// as one string, which repair makes a list) and a calculation. It waits
// for the pause and returns the turn and the refund call's id.
func approvalTurn(t *testing.T, h *harness, s *shop, register ...bool) (string, string) {
	t.Helper()
	if len(register) == 0 || register[0] {
		h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "shop", url: $u, allowedTools: ["lookup", "refund"], defaultApproval: WRITES}) { id defaultApproval } }`,
			map[string]any{"u": s.url})
	}
	conv := h.conversation(t, "shop__lookup", "shop__refund")
	id := h.send(t, conv, "Refund order A1", "")
	got := h.wait(t, id)
	require.Equal(t, turn.StatusWAITING_FOR_APPROVAL, got.Status, got.Error)
	calls := h.calls(t, id)
	require.Len(t, calls, 3)
	return id, gid.Encode(calls[1].ID)
}

func batchOfThree(then ...model.Response) *scripted {
	return &scripted{answers: append([]model.Response{{ToolCalls: []model.ToolCall{
		call("l", "shop__lookup", `{"order": "A1"}`),
		call("r", "shop__refund", `{"orders": "A1", "amount": 12.5}`),
		call("c", "calculator", `{"expression": "12.5 * 2"}`),
	}}}, then...)}
}

const pendingQuery = `query($id: ID!) { node(id: $id) { ... on Turn { status pendingApprovals { id name arguments outcome
  approval { tool arguments description policy annotations { readOnlyHint destructiveHint } decision expiresAt } } } } }`

// A batch of three with one gated call: the other two run, the turn
// waits with the refund's arguments as they would be sent, and nothing of
// it reaches the application until it is approved; then it runs once and
// the model hears all three in order.
func TestApprovalPausesOnlyTheGatedCall(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Refunded."})
		h := newHarness(t, d, p)
		s := newShop(t)
		id, refund := approvalTurn(t, h, s)
		calls := h.calls(t, id)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome)
		require.Equal(t, schematype.OutcomePending, calls[1].Outcome)
		require.Equal(t, schematype.OutcomeHits, calls[2].Outcome)
		require.Empty(t, s.sent(), "nothing of a pending call reaches the application")
		require.Equal(t, 1, p.count(), "the model is not asked again while the turn waits")

		got := h.gql(t, pendingQuery, map[string]any{"id": id})
		node := got["node"].(map[string]any)
		require.Equal(t, "WAITING_FOR_APPROVAL", node["status"])
		pending := node["pendingApprovals"].([]any)
		require.Len(t, pending, 1)
		pc := pending[0].(map[string]any)
		require.Equal(t, refund, pc["id"])
		require.Equal(t, "shop__refund", pc["name"])
		require.JSONEq(t, `{"orders": ["A1"], "amount": 12.5}`, pc["arguments"].(string), "after repair")
		ap := pc["approval"].(map[string]any)
		require.JSONEq(t, pc["arguments"].(string), ap["arguments"].(string))
		require.Equal(t, "Refund orders to the customer's card.", ap["description"])
		require.Equal(t, "WRITES", ap["policy"])
		require.Equal(t, true, ap["annotations"].(map[string]any)["destructiveHint"])
		require.Nil(t, ap["decision"])

		sub := h.runner.Events().Subscribe(mustID(t, id))
		defer sub.Close()
		out := h.gql(t, `mutation($t: ID!, $c: ID!) { decideToolCalls(input: {turnId: $t, decisions: [{toolCallId: $c, decision: APPROVE}]}) { status } }`,
			map[string]any{"t": id, "c": refund})
		require.Equal(t, "RUNNING", out["decideToolCalls"].(map[string]any)["status"])
		require.Equal(t, events.ApprovalDecided, (<-sub.C).Kind)
		e := <-sub.C
		require.Equal(t, events.Status, e.Kind)
		require.Equal(t, "RUNNING", e.Status)

		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		require.Len(t, s.sent(), 1, "approved: it runs once")
		require.JSONEq(t, `{"orders": ["A1"], "amount": 12.5}`, s.sent()[0])
		// The model's view: the three calls answered in the order asked.
		req := p.request(1)
		var tools []model.Message
		for _, m := range req.Messages {
			if m.Role == model.RoleTool {
				tools = append(tools, m)
			}
		}
		require.Len(t, tools, 3)
		require.Equal(t, []string{"l", "r", "c"}, []string{tools[0].ToolCallID, tools[1].ToolCallID, tools[2].ToolCallID})
		require.Contains(t, tools[1].Text, "refunded")
		require.False(t, tools[1].IsError)
		a := h.client.Approval.Query().OnlyX(tenancy.System(context.Background()))
		require.Equal(t, schematype.DecisionApprove, *a.Decision)
		require.Equal(t, h.grant.UserID, *a.DecidedByID)
	})
}

func mustID(t *testing.T, s string) int {
	t.Helper()
	id, err := gid.Decode(s)
	require.NoError(t, err)
	return id
}

// decide sends decideToolCalls and returns its data and errors.
func (h *harness) decide(t *testing.T, token, turnID string, decisions []map[string]any) (map[string]any, []any) {
	t.Helper()
	return h.tryAs(t, token, `mutation($t: ID!, $d: [ToolCallDecisionInput!]!) { decideToolCalls(input: {turnId: $t, decisions: $d}) { status } }`,
		map[string]any{"t": turnID, "d": decisions})
}

// Edited arguments are checked against the tool's schema before anything
// is stored (a failing edit changes nothing); a fitting edit runs with
// them, and the model is told they were changed, and to what.
func TestApprovalEdit(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Refunded 10."})
		h := newHarness(t, d, p)
		s := newShop(t)
		id, refund := approvalTurn(t, h, s)

		_, errs := h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": refund, "decision": "EDIT", "arguments": `{"orders": ["A1"], "amount": "ten"}`}})
		require.Len(t, errs, 1)
		msg := errs[0].(map[string]any)["message"].(string)
		require.Contains(t, msg, "do not fit shop__refund's schema")
		require.Equal(t, "BAD_USER_INPUT", errs[0].(map[string]any)["extensions"].(map[string]any)["code"])
		a := h.client.Approval.Query().OnlyX(tenancy.System(context.Background()))
		require.Nil(t, a.Decision, "a failing edit stores nothing")
		require.Equal(t, turn.StatusWAITING_FOR_APPROVAL, h.wait(t, id).Status)

		_, errs = h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": refund, "decision": "EDIT", "arguments": `{"orders": ["A1"], "amount": 10}`}})
		require.Empty(t, errs)
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		require.Equal(t, []string{`{"amount":10,"orders":["A1"]}`}, compact(t, s.sent()))
		heard := p.request(1).Messages
		var refundHeard string
		for _, m := range heard {
			if m.ToolCallID == "r" && m.Role == model.RoleTool {
				refundHeard = m.Text
			}
		}
		require.Contains(t, refundHeard, `The person changed this call's arguments before it ran: it ran with {"orders": ["A1"], "amount": 10} in place of {"amount":12.5,"orders":["A1"]}.`)
		require.Contains(t, refundHeard, "refunded")
		c := h.calls(t, id)[1]
		require.JSONEq(t, `{"orders": ["A1"], "amount": 10}`, c.Arguments, "the call records what was sent")
	})
}

func compact(t *testing.T, raw []string) []string {
	out := make([]string, len(raw))
	for i, r := range raw {
		var v any
		require.NoError(t, json.Unmarshal([]byte(r), &v))
		b, err := json.Marshal(v)
		require.NoError(t, err)
		out[i] = string(b)
	}
	return out
}

// A declined call never runs; its outcome is DECLINED, and the model
// hears that the person declined it and why.
func TestApprovalDecline(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "I did not refund it."})
		h := newHarness(t, d, p)
		s := newShop(t)
		id, refund := approvalTurn(t, h, s)
		_, errs := h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": refund, "decision": "DECLINE", "reason": "wrong customer"}})
		require.Empty(t, errs)
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		require.Empty(t, s.sent())
		c := h.calls(t, id)[1]
		require.Equal(t, schematype.OutcomeDeclined, c.Outcome)
		var heard model.Message
		for _, m := range p.request(1).Messages {
			if m.ToolCallID == "r" && m.Role == model.RoleTool {
				heard = m
			}
		}
		require.Equal(t, "Declined: the call never ran. The person declined it. Their reason: wrong customer", heard.Text)
		require.True(t, heard.IsError)
		got := h.gql(t, `query($id: ID!) { node(id: $id) { ... on ToolCall { outcome approval { decision reason decidedBy { name } } } } }`,
			map[string]any{"id": gid.Encode(c.ID)})
		require.Equal(t, "DECLINED", dig(got, "node", "outcome"))
		require.Equal(t, "wrong customer", dig(got, "node", "approval", "reason"))
		require.Equal(t, "Ada Lovelace", dig(got, "node", "approval", "decidedBy", "name"))
	})
}

// An approval nobody answers past the configured time is declined as "no
// answer", and the turn goes on.
func TestApprovalTimeout(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Nobody approved the refund."})
		h := newHarness(t, d, p, func(c *loop.Config) { c.ApprovalTimeout = 90 * time.Minute })
		s := newShop(t)
		id, _ := approvalTurn(t, h, s)
		ctx := tenancy.System(context.Background())
		a := h.client.Approval.Query().OnlyX(ctx)
		require.Equal(t, h.now.Add(90*time.Minute), a.ExpiresAt.UTC(), "the configured time")
		n, err := h.runner.ExpireApprovals(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "not due yet")
		// Its time passes (the runner's clock stands still in the harness).
		h.client.Approval.UpdateOneID(a.ID).SetExpiresAt(h.now.Add(-time.Second)).ExecX(ctx)
		n, err = h.runner.ExpireApprovals(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		require.Empty(t, s.sent())
		a = h.client.Approval.GetX(ctx, a.ID)
		require.True(t, a.TimedOut)
		require.Equal(t, loop.NoAnswer, *a.Reason)
		require.Nil(t, a.DecidedByID)
		require.Equal(t, schematype.OutcomeDeclined, h.calls(t, id)[1].Outcome)
		require.Contains(t, lastToolOf(p.request(1), "r").Text, "Nobody decided on it in time (no answer)")
	})
}

func lastToolOf(req model.Request, id string) model.Message {
	var out model.Message
	for _, m := range req.Messages {
		if m.Role == model.RoleTool && m.ToolCallID == id {
			out = m
		}
	}
	return out
}

// Two approvals of one call at once (a double click, two tabs): one takes
// effect, the other is told the call was decided already, and the refund
// is sent once.
func TestApprovalTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Refunded."})
		h := newHarness(t, d, p)
		s := newShop(t)
		id, refund := approvalTurn(t, h, s)
		var wg sync.WaitGroup
		errs := make([][]any, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": refund, "decision": "APPROVE"}})
			}()
		}
		wg.Wait()
		refused := 0
		for _, e := range errs {
			if len(e) > 0 {
				refused++
				require.Contains(t, e[0].(map[string]any)["message"], "decided already")
			}
		}
		require.Equal(t, 1, refused, "one takes effect, the other is told")
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		require.Len(t, s.sent(), 1)
		// Later still: the same clear answer.
		_, late := h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": refund, "decision": "DECLINE"}})
		require.Len(t, late, 1)
		require.Contains(t, late[0].(map[string]any)["message"], "decided already (APPROVE at")
		require.Len(t, s.sent(), 1)
	})
}

// Someone else (another user of the organisation, its admin excepted from
// nothing, or a person of another organisation) is refused exactly as for
// a turn or call that does not exist.
func TestApprovalRefusedOutsideTheConversation(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Refunded."})
		h := newHarness(t, d, p)
		s := newShop(t)
		id, refund := approvalTurn(t, h, s)
		ctx := tenancy.System(context.Background())
		other, err := auth.Bootstrap(ctx, h.client, "Other Org", "Eve", "Sales")
		require.NoError(t, err)
		made := h.gql(t, `mutation { createUser(input: {name: "Bob"}) { token { token } } }`, nil)
		bob := dig(made, "createUser", "token", "token").(string)

		approve := []map[string]any{{"toolCallId": refund, "decision": "APPROVE"}}
		_, nothing := h.decide(t, h.grant.Token, gid.Encode(1<<40+7), approve)
		require.Len(t, nothing, 1)
		for _, tok := range []string{other.Token, bob} {
			_, errs := h.decide(t, tok, id, approve)
			require.Equal(t, nothing, errs, "refused like a turn that never existed")
		}
		_, madeUp := h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": gid.Encode(1<<40 + 9), "decision": "APPROVE"}})
		require.Equal(t, nothing, madeUp, "a call not waiting in the turn reads as not there")
		require.Empty(t, s.sent())
		a := h.client.Approval.Query().Where(approval.DecisionIsNil()).CountX(ctx)
		require.Equal(t, 1, a, "still waiting")

		// A conversation deleted takes its approvals with it.
		conv := h.client.Turn.GetX(ctx, mustID(t, id)).ConversationID
		h.gql(t, `mutation($id: ID!) { deleteConversation(id: $id) }`, map[string]any{"id": gid.Encode(conv)})
		require.Zero(t, h.client.Approval.Query().CountX(ctx))
	})
}

// A crash after the decision is stored and before the call is taken up
// runs it once on resume, never asking again; a crash after it was taken
// up (it may have reached the application) never sends a destructive call
// again: it may have run.
func TestApprovalSurvivesACrash(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Done."})
		p.answers = append(p.answers, p.answers...)
		h := newHarness(t, d, p)
		s := newShop(t)
		for k, takenUp := range []bool{false, true} {
			id, refund := approvalTurn(t, h, s, k == 0)
			ctx := tenancy.System(context.Background())
			// The decision is stored as decideToolCalls stores it; the
			// process dies before the job runs (its queue entry is lost).
			tx, err := h.client.Tx(ctx)
			require.NoError(t, err)
			by := h.grant.UserID
			dec, err := loop.Decide(ctx, tx.Client(), mustID(t, id), []loop.Decision{{ToolCallID: mustID(t, refund), Decision: schematype.DecisionApprove}}, &by, h.now)
			require.NoError(t, err)
			require.True(t, dec.Resumed)
			require.NoError(t, tx.Commit())
			if takenUp {
				// ... or after the runner took it up to send it.
				h.client.Approval.Update().Where(approval.ToolCallID(mustID(t, refund))).SetDispatchedAt(h.now).ExecX(ctx)
			}
			h.client.Turn.UpdateOneID(mustID(t, id)).ClearHeartbeatAt().ExecX(ctx)
			n, err := h.runner.Resume(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			done := h.wait(t, id)
			require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
			c := h.calls(t, id)[1]
			require.Len(t, s.sent(), 1, "run once, not asked again, never sent twice")
			if takenUp {
				require.Equal(t, schematype.OutcomeMayHaveRun, c.Outcome)
			} else {
				require.Equal(t, schematype.OutcomeHits, c.Outcome)
			}
			require.Equal(t, 2*(k+1), p.count())
		}
	})
}

// tryAs is try with another token.
func (h *harness) tryAs(t testing.TB, token, query string, vars map[string]any) (map[string]any, []any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []any          `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return out.Data, out.Errors
}

// An application registered without a policy asks for nothing (its calls
// run as before approvals existed); an agent may tighten its policy: a
// read-only tool set ALWAYS waits too. Decisions may come one at a time:
// the turn resumes once every waiting call has one.
func TestApprovalPoliciesAndPartialDecisions(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Refunded."})
		p.answers = append(p.answers, p.answers...)
		h := newHarness(t, d, p)
		s := newShop(t)
		app := h.gql(t, `mutation($u: String!) { registerApplication(input: {name: "shop", url: $u, allowedTools: ["lookup", "refund"]}) { id defaultApproval approvals { tool } } }`,
			map[string]any{"u": s.url})
		require.Equal(t, "NEVER", dig(app, "registerApplication", "defaultApproval"))
		id := h.send(t, h.conversation(t, "shop__lookup", "shop__refund"), "Refund order A1", "")
		require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
		require.Len(t, s.sent(), 1, "NEVER: it ran without asking")

		// The admin asks for writes; the agent asks for every lookup too.
		h.gql(t, `mutation($id: ID!) { updateApplication(input: {id: $id, defaultApproval: WRITES}) { application { defaultApproval } } }`,
			map[string]any{"id": dig(app, "registerApplication", "id")})
		_, errs := h.try(t, `mutation { createAgent(input: {name: "Loose", tools: ["shop__refund"], approvals: [{tool: "shop__lookup", policy: ALWAYS}]}) { id } }`, nil)
		require.Len(t, errs, 1, "a rule for a tool the agent does not have is refused")
		a := h.gql(t, `mutation { createAgent(input: {name: "Careful", tools: ["shop__lookup", "shop__refund"],
		  approvals: [{tool: "shop__lookup", policy: ALWAYS}, {tool: "shop__refund", policy: NEVER}]}) { id approvals { tool policy } } }`, nil)
		require.Len(t, dig(a, "createAgent", "approvals"), 2)
		cat := h.gql(t, `query($a: ID) { catalogue(agentId: $a) { tools { name approval asksApproval } } }`,
			map[string]any{"a": dig(a, "createAgent", "id")})
		policies := map[string]string{}
		for _, tool := range dig(cat, "catalogue", "tools").([]any) {
			m := tool.(map[string]any)
			policies[m["name"].(string)] = fmt.Sprint(m["approval"], " ", m["asksApproval"])
		}
		require.Equal(t, "ALWAYS true", policies["shop__lookup"])
		require.Equal(t, "WRITES true", policies["shop__refund"])
		require.Equal(t, "NEVER false", policies["calculator"])
		c := h.gql(t, `mutation($a: ID!) { startConversation(input: {agentId: $a, title: "t"}) { id } }`,
			map[string]any{"a": dig(a, "createAgent", "id")})
		id = h.send(t, dig(c, "startConversation", "id").(string), "Refund order A1", "")
		got := h.wait(t, id)
		require.Equal(t, turn.StatusWAITING_FOR_APPROVAL, got.Status, got.Error)
		calls := h.calls(t, id)
		require.Equal(t, schematype.OutcomePending, calls[0].Outcome, "the agent's ALWAYS tightens a read-only tool")
		require.Equal(t, schematype.OutcomePending, calls[1].Outcome, "the agent's NEVER does not loosen the application's WRITES")
		require.Equal(t, schematype.OutcomeHits, calls[2].Outcome)
		pending := dig(h.gql(t, pendingQuery, map[string]any{"id": id}), "node", "pendingApprovals").([]any)
		require.Len(t, pending, 2)

		_, errs = h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": gid.Encode(calls[0].ID), "decision": "APPROVE"}})
		require.Empty(t, errs)
		require.Equal(t, turn.StatusWAITING_FOR_APPROVAL, h.wait(t, id).Status, "one call still waits")
		pending = dig(h.gql(t, pendingQuery, map[string]any{"id": id}), "node", "pendingApprovals").([]any)
		require.Len(t, pending, 1)
		require.Equal(t, 3, p.count(), "the model is not asked while a call waits")
		_, errs = h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": gid.Encode(calls[1].ID), "decision": "DECLINE"}})
		require.Empty(t, errs)
		done := h.wait(t, id)
		require.Equal(t, turn.StatusCOMPLETED, done.Status, done.Error)
		calls = h.calls(t, id)
		require.Equal(t, schematype.OutcomeHits, calls[0].Outcome)
		require.Equal(t, schematype.OutcomeDeclined, calls[1].Outcome)
		require.Len(t, s.sent(), 1, "the declined refund never ran")
		require.Equal(t, "Declined: the call never ran. The person declined it (no reason given).", lastToolOf(p.request(3), "r").Text)

		list := h.gql(t, `{ approvals { tool decision decidedBy { name } } }`, nil)
		require.Len(t, list["approvals"], 2)
		pendingNone := h.gql(t, `{ approvals(pending: true) { tool } }`, nil)
		require.Empty(t, pendingNone["approvals"])
	})
}

// readEvents reads a subscription's events (kind, status, tool call name
// and outcome) until it completes.
func readEvents(t *testing.T, c *websocket.Conn, ctx context.Context, after func(i int, line string)) []string {
	t.Helper()
	var lines []string
	for i := 0; ; i++ {
		var m wsMessage
		require.NoError(t, wsjson.Read(ctx, c, &m))
		if m.Type == "complete" {
			return lines
		}
		require.Equal(t, "next", m.Type, string(m.Payload))
		var ev eventPayload
		require.NoError(t, json.Unmarshal(m.Payload, &ev))
		require.Empty(t, ev.Errors)
		e := ev.Data.TurnEvents
		line := e.Kind + " " + e.Turn.Status
		if e.ToolCall != nil {
			line += " " + e.ToolCall.Name + " " + e.ToolCall.Outcome
		}
		lines = append(lines, line)
		if after != nil {
			after(i, line)
		}
	}
}

// The portal's side over the subscription: the waiting status, then each
// decision, the turn's return to RUNNING, and the approved call's own
// events after it.
func TestApprovalEvents(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		p := batchOfThree(model.Response{Text: "Refunded."})
		h := newHarness(t, d, p)
		s := newShop(t)
		id, refund := approvalTurn(t, h, s)
		c, ctx := subscribe(t, h, h.grant.Token, id)
		lines := readEvents(t, c, ctx, func(i int, line string) {
			if i == 0 {
				require.Equal(t, "STATUS WAITING_FOR_APPROVAL", line, "the current status first")
				_, errs := h.decide(t, h.grant.Token, id, []map[string]any{{"toolCallId": refund, "decision": "APPROVE"}})
				require.Empty(t, errs)
			}
		})
		// The decided call is read as of the read: it may have run by then.
		lines[1] = strings.TrimSuffix(strings.TrimSuffix(lines[1], " PENDING"), " HITS")
		require.Equal(t, []string{
			"STATUS WAITING_FOR_APPROVAL",
			"APPROVAL_DECIDED WAITING_FOR_APPROVAL shop__refund",
			"STATUS RUNNING",
			"TOOL_CALL_STARTED RUNNING shop__refund PENDING",
			"TOOL_CALL_FINISHED RUNNING shop__refund HITS",
			"MODEL_CALL_STARTED RUNNING",
			"MODEL_CALL_FINISHED RUNNING",
			"ANSWER COMPLETED",
			"STATUS COMPLETED",
		}, lines)

	})
}
