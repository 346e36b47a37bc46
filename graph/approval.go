package graph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/99designs/gqlgen/graphql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/approval"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/loader"
	"github.com/toolgate/toolgate/graph/model"
	gate "github.com/toolgate/toolgate/runtime/approval"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/registry"
)

// maxApprovals is the most approvals Query.approvals lists.
const maxApprovals = 100

// checkRules reads approval rules: each names a tool of known (an
// application's allowed tools, an agent's tools) once, with a policy.
func checkRules(rules []*schematype.ApprovalRule, known []string, what string) ([]schematype.ApprovalRule, error) {
	out := make([]schematype.ApprovalRule, 0, len(rules))
	seen := map[string]bool{}
	for i, r := range rules {
		tool := strings.TrimSpace(r.Tool)
		switch {
		case !slices.Contains(known, tool):
			return nil, inputErrorf("approvals[%d]: %q is not one of the %s", i, tool, what)
		case seen[tool]:
			return nil, inputErrorf("approvals[%d]: %q has a rule already", i, tool)
		case !r.Policy.Valid():
			return nil, inputErrorf("approvals[%d]: want NEVER, WRITES or ALWAYS", i)
		}
		seen[tool] = true
		out = append(out, schematype.ApprovalRule{Tool: tool, Policy: r.Policy})
	}
	return out, nil
}

// applicationRules checks an application's rules against its allowed
// tools; nil rules: none given.
func applicationRules(rules []*schematype.ApprovalRule, allowed []string) ([]schematype.ApprovalRule, error) {
	if rules == nil {
		return nil, nil
	}
	return checkRules(rules, allowed, "application's allowedTools")
}

// agentRules checks an agent's rules against its tools: an agent's rule
// only tightens its applications' (loop's approval.Policy).
func agentRules(rules []*schematype.ApprovalRule, tools []string) ([]schematype.ApprovalRule, error) {
	if rules == nil {
		return nil, nil
	}
	return checkRules(rules, tools, "agent's tools")
}

// approvalPolicies sets each catalogue tool's approval policy: for the
// agent's application tools, their application's rules tightened by the
// agent's; for built-in tools, the agent's alone.
func (r *Resolver) approvalPolicies(ctx context.Context, c *catalog.Catalogue, agentID *int, apps []catalog.Application) error {
	var agentRules []schematype.ApprovalRule
	if agentID != nil {
		a, err := r.Client.Agent.Get(ctx, *agentID)
		if err != nil {
			return err
		}
		agentRules = a.Approvals
	}
	defs := map[string]tools.Definition{}
	for _, d := range registry.All() {
		defs[d.Name] = d
	}
	rules := map[string]*ent.Application{}
	if len(apps) > 0 {
		for _, app := range apps {
			for _, d := range app.Tools {
				defs[d.Name] = d
			}
		}
		rows, err := r.Client.Application.Query().All(ctx)
		if err != nil {
			return fmt.Errorf("load applications: %w", err)
		}
		for _, row := range rows {
			rules[row.Name] = row
		}
	}
	for i := range c.Tools {
		t := &c.Tools[i]
		def, ok := defs[t.Name]
		if !ok {
			// An application tool its server did not describe: it may write.
			def = tools.Definition{Name: t.Name, Family: mcp.Family}
		}
		rs := gate.Rules{Agent: agentRules}
		if app, _, ok := mcp.SplitToolName(t.Name); ok && def.Family == mcp.Family {
			if row := rules[app]; row != nil {
				rs.Application, rs.Default = row.Approvals, row.DefaultApproval
			}
		}
		t.Approval = gate.Policy(def, rs)
		t.AsksApproval = gate.Gates(def, t.Approval)
	}
	return nil
}

// keptRules are the rules of old that still name a tool of known: an
// update that drops a tool drops its rule.
func keptRules(old []schematype.ApprovalRule, known []string) []*schematype.ApprovalRule {
	out := []*schematype.ApprovalRule{}
	for _, rule := range old {
		if slices.Contains(known, rule.Tool) {
			out = append(out, &rule)
		}
	}
	return out
}

func (r *Resolver) decideToolCalls(ctx context.Context, in model.DecideToolCallsInput) (*ent.Turn, error) {
	v, err := apiViewer(ctx)
	if err != nil {
		return nil, err
	}
	c := r.client(ctx)
	t, err := c.Turn.Get(ctx, in.TurnID)
	if err != nil {
		return nil, err
	}
	// The conversation's user decides, and nobody else: an admin who may
	// read the turn is refused as for a turn that is not there.
	conv, err := c.Conversation.Get(ctx, t.ConversationID)
	if err != nil {
		return nil, err
	}
	if conv.UserID != v.UserID {
		return nil, auth.ErrNotFound
	}
	ds := make([]loop.Decision, len(in.Decisions))
	for i, d := range in.Decisions {
		ds[i] = loop.Decision{ToolCallID: d.ToolCallID, Decision: d.Decision, Arguments: d.Arguments, Reason: d.Reason}
		if d.Reason != nil {
			reason := strings.TrimSpace(*d.Reason)
			ds[i].Reason = &reason
			if reason == "" {
				ds[i].Reason = nil
			}
		}
	}
	now := r.now()
	if r.Runner != nil {
		now = r.Runner.Now()
	}
	by := v.UserID
	decided, err := loop.Decide(ctx, c, t.ID, ds, &by, now)
	var refused *loop.DecisionError
	switch {
	case errors.Is(err, loop.ErrNoSuchCall):
		return nil, auth.ErrNotFound
	case errors.As(err, &refused):
		return nil, inputErrorf("%s", refused.Error())
	case err != nil:
		return nil, err
	}
	// Registered first, so run last: the decisions are told before the
	// resumed run tells anything.
	if decided.Resumed {
		r.startAfterCommit(ctx, t.ID)
	}
	if tx := ent.TxFromContext(ctx); tx != nil && r.Runner != nil {
		tx.OnCommit(func(next ent.Committer) ent.Committer {
			return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
				if err := next.Commit(ctx, tx); err != nil {
					return err
				}
				r.Runner.Announce(t.ID, decided)
				return nil
			})
		})
	}
	return c.Turn.Get(ctx, t.ID)
}

// pendingApprovals lists the calls of a turn waiting for a decision, in
// the order the model asked for them; none unless the turn waits. A page
// of turns reads its approvals and its calls in one statement each
// (loader), a mutation's answer inside its own transaction.
func (r *Resolver) pendingApprovals(ctx context.Context, t *ent.Turn) ([]*ent.ToolCall, error) {
	if t.Status != turn.StatusWAITING_FOR_APPROVAL {
		return []*ent.ToolCall{}, nil
	}
	if ent.TxFromContext(ctx) != nil {
		c := r.client(ctx)
		ids, err := c.Approval.Query().Where(approval.TurnID(t.ID), approval.DecisionIsNil()).
			Select(approval.FieldToolCallID).Ints(ctx)
		if err != nil {
			return nil, fmt.Errorf("load pending approvals: %w", err)
		}
		return c.ToolCall.Query().Where(toolcall.TurnID(t.ID), toolcall.IDIn(ids...)).
			Order(ent.Asc(toolcall.FieldPosition)).All(ctx)
	}
	as, err := loader.For(ctx).Approvals(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("load pending approvals: %w", err)
	}
	waiting := map[int]bool{}
	for _, a := range as {
		if a.Decision == nil {
			waiting[a.ToolCallID] = true
		}
	}
	out := []*ent.ToolCall{}
	if len(waiting) == 0 {
		return out, nil
	}
	calls, err := loader.For(ctx).ToolCalls(ctx, t, loader.ColumnsFor(ctx))
	if err != nil {
		return nil, err
	}
	for _, c := range calls {
		if waiting[c.ID] {
			out = append(out, c)
		}
	}
	return out, nil
}

// approvalOf is a call's approval, or nil for a call that needed none;
// the approvals of a page of turns are read in one statement (loader).
func (r *Resolver) approvalOf(ctx context.Context, call *ent.ToolCall) (*ent.Approval, error) {
	if ent.TxFromContext(ctx) != nil {
		a, err := r.client(ctx).Approval.Query().Where(approval.ToolCallID(call.ID)).Only(ctx)
		if ent.IsNotFound(err) {
			return nil, nil
		}
		return a, err
	}
	as, err := loader.For(ctx).Approvals(ctx, &ent.Turn{ID: call.TurnID})
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if a.ToolCallID == call.ID {
			return a, nil
		}
	}
	return nil, nil
}

// approvals lists the approvals the caller may read, newest first.
func (r *Resolver) approvals(ctx context.Context, pending *bool, first *int) ([]*ent.Approval, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	n := maxApprovals
	if first != nil {
		if *first < 0 {
			return nil, inputErrorf("first is negative")
		}
		n = min(*first, maxApprovals)
	}
	q := r.client(ctx).Approval.Query()
	if pending != nil && *pending {
		q.Where(approval.DecisionIsNil(), approval.HasTurnWith(turn.StatusEQ(turn.StatusWAITING_FOR_APPROVAL)))
	}
	// What the list's rows are asked for is read with the list, a
	// statement per level (the console's: the call, its turn, conversation
	// and person, and who decided), not a statement per row.
	for _, f := range graphql.CollectFieldsCtx(ctx, nil) {
		switch f.Name {
		case "toolCall":
			q.WithToolCall(func(q *ent.ToolCallQuery) {
				q.WithTurn(func(q *ent.TurnQuery) {
					q.WithConversation(func(q *ent.ConversationQuery) { q.WithUser() })
				})
			})
		case "decidedBy":
			q.WithDecidedBy()
		}
	}
	return q.Order(ent.Desc(approval.FieldCreatedAt), ent.Desc(approval.FieldID)).Limit(n).All(ctx)
}
