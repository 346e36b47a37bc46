package graph

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"entgo.io/contrib/entgql"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	entbudget "github.com/toolgate/toolgate/ent/budget"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/model/replay"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/budget"
	"github.com/toolgate/toolgate/tools/registry"
)

// MaxMessageChars is the longest message a user may send.
const MaxMessageChars = 100_000

// apiViewer returns the caller when it holds an API token: turns are
// started and steered by people, never by a turn's scope token.
func apiViewer(ctx context.Context) (*auth.Viewer, error) {
	v, err := auth.FromContext(ctx)
	if err != nil {
		return nil, err
	}
	if v.Scoped() {
		return nil, auth.ErrNotFound
	}
	return v, nil
}

// startAfterCommit enqueues the turn's job once the mutation's transaction
// has committed, so the job never reads a turn that is not there yet. An
// enqueue that fails is logged: the runner's sweep enqueues every RUNNING
// turn without a job.
func (r *Resolver) startAfterCommit(ctx context.Context, turnID int) {
	r.enqueueAfterCommit(ctx, turnID, false)
}

// enqueueAfterCommit is startAfterCommit; fresh says the turn was just
// stored and has made no model call (Runner.StartNew).
func (r *Resolver) enqueueAfterCommit(ctx context.Context, turnID int, fresh bool) {
	if r.Runner == nil {
		return
	}
	start := func(ctx context.Context) {
		enqueue := r.Runner.Start
		if fresh {
			enqueue = r.Runner.StartNew
		}
		if _, err := enqueue(ctx, turnID); err != nil {
			r.Log.ErrorContext(ctx, "enqueue turn", "turn", EncodeID(turnID), "err", err)
		}
	}
	tx := ent.TxFromContext(ctx)
	if tx == nil {
		start(ctx)
		return
	}
	tx.OnCommit(func(next ent.Committer) ent.Committer {
		return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
			if err := next.Commit(ctx, tx); err != nil {
				return err
			}
			start(context.WithoutCancel(ctx))
			return nil
		})
	})
}

func (r *Resolver) sendMessage(ctx context.Context, in model.SendMessageInput) (*ent.Turn, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	text := strings.TrimSpace(in.Text)
	if text == "" {
		return nil, inputErrorf("text is empty")
	}
	if n := utf8.RuneCountInString(text); n > MaxMessageChars {
		return nil, inputErrorf("text is %d characters; at most %d", n, MaxMessageChars)
	}
	zone := "UTC"
	if in.TimeZone != nil && strings.TrimSpace(*in.TimeZone) != "" {
		zone = strings.TrimSpace(*in.TimeZone)
		if _, err := time.LoadLocation(zone); err != nil || zone == "Local" {
			return nil, inputErrorf("unknown time zone %q: use an IANA name such as Europe/Paris", zone)
		}
	}
	c := r.client(ctx)
	conv, err := c.Conversation.Get(ctx, in.ConversationID)
	if err != nil {
		return nil, err
	}
	if conv.ArchivedAt != nil {
		return nil, inputErrorf("the conversation is archived: bring it back (archiveConversation with archived: false) to send a message")
	}
	limit := turnsLimitOf(ctx)
	tt, err := turnsOf(ctx, c, conv, limit.userID)
	if err != nil {
		return nil, err
	}
	busy, last, limited := tt.Busy > 0, tt.Last, tt.Limited > 0
	if err := tooManyTurns(tt.Running, limit.most); err != nil {
		return nil, err
	}
	if busy {
		return nil, errTurnBusy
	}
	// Who pays is the conversation's user and organisation: refused once
	// either limit is spent this month, before a turn is stored. Without a
	// limit set there is nothing more to read.
	if limited {
		if err := budget.Enforce(ctx, c, conv.OrganizationID, conv.UserID, r.now()); err != nil {
			return nil, err
		}
	}
	now := r.now()
	t, err := c.Turn.Create().
		SetConversationID(conv.ID).SetNumber(last + 1).SetUserText(text).SetTimeZone(zone).SetStartedAt(now).
		SetHeartbeatAt(now). // queued as of now: the sweep leaves it to its job
		Save(ctx)
	if ent.IsConstraintError(err) {
		return nil, errTurnBusy
	}
	if err != nil {
		return nil, err
	}
	// The insert's hook (db) marked the conversation updated as of now.
	r.enqueueAfterCommit(ctx, t.ID, true)
	return t, nil
}

// busyStatuses are the statuses of a turn that keeps its conversation
// from taking another message.
var busyStatuses = []turn.Status{turn.StatusRUNNING, turn.StatusWAITING_FOR_CLARIFICATION, turn.StatusWAITING_FOR_APPROVAL}

// turnsRead is what sendMessage reads of turns and limits in one
// statement (turnsOf).
type turnsRead struct {
	// Busy: a turn of the conversation runs or waits (1), or none (0).
	Busy int `json:"busy"`
	// Last is the conversation's last turn number (0: none yet).
	Last int `json:"last"`
	// Limited: a monthly limit is set for the organisation or the user.
	Limited int `json:"limited"`
	// Running counts the caller's RUNNING turns (runningOf's), when asked.
	Running int `json:"running"`
}

// turnsOf reads, in one statement, whether the conversation has a turn
// running or waiting, its last turn's number, whether a monthly limit is
// set for its organisation or its user and, for runningOf other than 0,
// how many turns of that user are RUNNING (the turns-at-once limit).
func turnsOf(ctx context.Context, c *ent.Client, conv *ent.Conversation, runningOf int) (turnsRead, error) {
	in := make([]string, len(busyStatuses))
	for i, st := range busyStatuses {
		in[i] = "'" + st.String() + "'" // the schema's own enum values
	}
	var rows []turnsRead
	err := c.Turn.Query().Where(turn.ConversationID(conv.ID)).Aggregate(
		func(s *entsql.Selector) string {
			return entsql.As("COALESCE(MAX(CASE WHEN "+s.C(turn.FieldStatus)+" IN ("+strings.Join(in, ", ")+") THEN 1 ELSE 0 END), 0)", "busy")
		},
		func(s *entsql.Selector) string {
			return entsql.As("COALESCE(MAX("+s.C(turn.FieldNumber)+"), 0)", "last")
		},
		// The budgets are read as the system, as budget.Enforce reads them;
		// the ids are the conversation's own integers.
		func(s *entsql.Selector) string {
			return entsql.As(fmt.Sprintf("CASE WHEN EXISTS (SELECT 1 FROM %s WHERE %s = %d AND (%s IS NULL OR %s = %d)) THEN 1 ELSE 0 END",
				s.Quote(entbudget.Table), s.Quote(entbudget.FieldOrganizationID), conv.OrganizationID,
				s.Quote(entbudget.FieldUserID), s.Quote(entbudget.FieldUserID), conv.UserID), "limited")
		},
		// As the turns-at-once check counts them: RUNNING turns of the
		// user's conversations, read as the system.
		func(s *entsql.Selector) string {
			if runningOf == 0 {
				return entsql.As("(0)", "running") // bare, As would quote it as a column
			}
			return entsql.As(fmt.Sprintf("(SELECT COUNT(*) FROM %[1]s AS r JOIN %[2]s AS rc ON r.%[3]s = rc.%[4]s WHERE r.%[5]s = '%[6]s' AND rc.%[7]s = %[8]d)",
				s.Quote(turn.Table), s.Quote(conversation.Table), s.Quote(turn.FieldConversationID), s.Quote(conversation.FieldID),
				s.Quote(turn.FieldStatus), turn.StatusRUNNING, s.Quote(conversation.FieldUserID), runningOf), "running")
		},
	).Scan(ctx, &rows)
	if err != nil {
		return turnsRead{}, err
	}
	if len(rows) == 0 {
		// Not expected (an aggregate answers one row): read the limits the
		// usual way, and count no running turn.
		return turnsRead{Limited: 1}, nil
	}
	return rows[0], nil
}

var errTurnBusy = tools.Refusef("a turn is already running or waiting in this conversation: wait for it, answer it, or cancel it")

func (r *Resolver) answerClarification(ctx context.Context, in model.AnswerClarificationInput) (*ent.Turn, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	answer := strings.TrimSpace(in.Answer)
	if answer == "" {
		return nil, inputErrorf("answer is empty")
	}
	c := r.client(ctx)
	t, err := c.Turn.Get(ctx, in.TurnID)
	if err != nil {
		return nil, err
	}
	if t.Status == turn.StatusWAITING_FOR_APPROVAL && t.Clarification != nil && t.Clarification.Answer == nil {
		return nil, inputErrorf("the turn waits for decisions on its pending calls first (decideToolCalls); its question is answered after them")
	}
	if t.Status != turn.StatusWAITING_FOR_CLARIFICATION || t.Clarification == nil {
		return nil, inputErrorf("the turn is %s, not waiting for an answer", strings.ToLower(string(t.Status)))
	}
	cl := *t.Clarification
	cl.Answer = &answer
	call, err := c.ToolCall.Query().
		Where(toolcall.TurnID(t.ID), toolcall.NameIn(registry.Pausing()...)).
		Order(ent.Desc(toolcall.FieldPosition)).First(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.ToolCall.UpdateOneID(call.ID).SetHeard(fmt.Sprintf("The user answered: %s", answer)).Exec(ctx); err != nil {
		return nil, err
	}
	now := r.now()
	if r.Runner != nil {
		now = r.Runner.Now()
	}
	// Queued as of now, for the job enqueued once this commits.
	t, err = t.Update().SetStatus(turn.StatusRUNNING).SetClarification(&cl).ClearClaimedBy().SetHeartbeatAt(now).Save(ctx)
	if err != nil {
		return nil, err
	}
	// The start's hook first, so it runs last: the resumed run tells
	// nothing before the turn's return to RUNNING is told.
	r.startAfterCommit(ctx, t.ID)
	r.publishAfterCommit(ctx, events.Event{Kind: events.Status, TurnID: t.ID, Step: call.Step, Status: string(turn.StatusRUNNING), At: now})
	return t, nil
}

func (r *Resolver) cancelTurn(ctx context.Context, id int) (*ent.Turn, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	t, err := c.Turn.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Status != turn.StatusRUNNING && t.Status != turn.StatusWAITING_FOR_CLARIFICATION && t.Status != turn.StatusWAITING_FOR_APPROVAL {
		return t, nil
	}
	t, err = t.Update().SetStatus(turn.StatusCANCELLED).SetFinishedAt(r.now()).SetError("cancelled").Save(ctx)
	if err != nil {
		return nil, err
	}
	if tx := ent.TxFromContext(ctx); tx != nil && r.Runner != nil {
		tx.OnCommit(func(next ent.Committer) ent.Committer {
			return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
				err := next.Commit(ctx, tx)
				if err == nil {
					r.Runner.Cancel(id)
					r.Runner.Ended(string(turn.StatusCANCELLED), t.StartedAt)
					r.Runner.Events().Publish(events.Event{Kind: events.Status, TurnID: id, Status: string(turn.StatusCANCELLED), At: r.now()})
				}
				return err
			})
		})
	}
	return t, nil
}

// estimatedModel says whether a model's figures are estimates: the replay
// provider's, counted with o200k and priced at a list price.
func estimatedModel(name string) bool { return name == replay.ModelName }

// usage sums the model calls of a calendar month in UTC, in three grouped
// statements (by model, agent and user) plus one each for the names.
func (r *Resolver) usage(ctx context.Context, month *string) (*model.Usage, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	start, end, err := monthRange(month, r.now())
	if err != nil {
		return nil, err
	}
	group := func(field string) ([]usageRow, error) {
		var rows []usageRow
		err := r.Client.ModelCall.Query().
			Where(modelcall.StartedAtGTE(start), modelcall.StartedAtLT(end)).
			GroupBy(field).
			Aggregate(
				ent.As(ent.Sum(modelcall.FieldInputTokens), "input"),
				ent.As(ent.Sum(modelcall.FieldCacheReadTokens), "cache_read"),
				ent.As(ent.Sum(modelcall.FieldCacheWriteTokens), "cache_write"),
				ent.As(ent.Sum(modelcall.FieldOutputTokens), "output"),
				ent.As(ent.Sum(modelcall.FieldCostMicros), "cost"),
				ent.As(ent.Sum(modelcall.FieldPrefixTokens), "prefix"),
				ent.As(ent.Count(), "calls"),
			).Scan(ctx, &rows)
		if err != nil {
			return nil, fmt.Errorf("usage by %s: %w", field, err)
		}
		return rows, nil
	}
	out := &model.Usage{Month: start.Format("2006-01"), Totals: &model.UsageTotals{},
		ByModel: []*model.ModelUsage{}, ByAgent: []*model.AgentUsage{}, ByUser: []*model.UserUsage{}}
	byModel, err := group(modelcall.FieldModel)
	if err != nil {
		return nil, err
	}
	all := out.Totals
	for _, m := range byModel {
		t := m.totals()
		all.InputTokens += t.InputTokens
		all.CacheReadTokens += t.CacheReadTokens
		all.CacheWriteTokens += t.CacheWriteTokens
		all.OutputTokens += t.OutputTokens
		all.PrefixTokens += t.PrefixTokens
		all.ModelCalls += t.ModelCalls
		all.Cost += t.Cost
		out.Estimated = out.Estimated || estimatedModel(m.Model)
		out.ByModel = append(out.ByModel, &model.ModelUsage{Model: m.Model, Estimated: estimatedModel(m.Model), Totals: t, InputTokens: int(t.InputTokens),
			CacheReadTokens: int(t.CacheReadTokens), CacheWriteTokens: int(t.CacheWriteTokens), OutputTokens: int(t.OutputTokens),
			Cost: t.Cost.USD(), ModelCalls: int(t.ModelCalls)})
	}
	out.InputTokens, out.CacheReadTokens, out.CacheWriteTokens = int(all.InputTokens), int(all.CacheReadTokens), int(all.CacheWriteTokens)
	out.OutputTokens, out.PrefixTokens, out.ModelCalls, out.Cost = int(all.OutputTokens), int(all.PrefixTokens), int(all.ModelCalls), all.Cost.USD()
	if in := all.InputTokens + all.CacheReadTokens + all.CacheWriteTokens; in > 0 {
		// The prefix is counted with o200k, the input by each provider's own
		// tokenizer: never show a share past the whole.
		out.PrefixShare = min(1, float64(all.PrefixTokens)/float64(in))
		out.CachedShare = float64(all.CacheReadTokens) / float64(in)
	}
	byAgent, err := group(modelcall.FieldAgentID)
	if err != nil {
		return nil, err
	}
	agentIDs := make([]int, len(byAgent))
	for i, a := range byAgent {
		agentIDs[i] = a.AgentID
	}
	agents, err := r.Client.Agent.Query().Where(agent.IDIn(agentIDs...)).All(ctx)
	if err != nil {
		return nil, err
	}
	agentByID := byID(agents, func(a *ent.Agent) int { return a.ID })
	for _, a := range byAgent {
		t := a.totals()
		out.ByAgent = append(out.ByAgent, &model.AgentUsage{Agent: agentByID[a.AgentID], Totals: t, InputTokens: int(t.InputTokens),
			CacheReadTokens: int(t.CacheReadTokens), CacheWriteTokens: int(t.CacheWriteTokens), OutputTokens: int(t.OutputTokens),
			Cost: t.Cost.USD(), ModelCalls: int(t.ModelCalls)})
	}
	byUser, err := group(modelcall.FieldUserID)
	if err != nil {
		return nil, err
	}
	userIDs := make([]int, len(byUser))
	for i, u := range byUser {
		userIDs[i] = u.UserID
	}
	users, err := r.Client.User.Query().Where(user.IDIn(userIDs...)).All(ctx)
	if err != nil {
		return nil, err
	}
	userByID := byID(users, func(u *ent.User) int { return u.ID })
	for _, u := range byUser {
		t := u.totals()
		out.ByUser = append(out.ByUser, &model.UserUsage{User: userByID[u.UserID], Totals: t, InputTokens: int(t.InputTokens),
			CacheReadTokens: int(t.CacheReadTokens), CacheWriteTokens: int(t.CacheWriteTokens), OutputTokens: int(t.OutputTokens),
			Cost: t.Cost.USD(), ModelCalls: int(t.ModelCalls)})
	}
	return out, nil
}

// usageRow is one group of model calls: by model, agent or user.
type usageRow struct {
	Model      string `json:"model"`
	AgentID    int    `json:"agent_id"`
	UserID     int    `json:"user_id"`
	Input      int64  `json:"input"`
	CacheRead  int64  `json:"cache_read"`
	CacheWrite int64  `json:"cache_write"`
	Output     int64  `json:"output"`
	Cost       int64  `json:"cost"`
	Prefix     int64  `json:"prefix"`
	Calls      int64  `json:"calls"`
}

func (u usageRow) totals() *model.UsageTotals {
	return &model.UsageTotals{InputTokens: u.Input, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite,
		OutputTokens: u.Output, PrefixTokens: u.Prefix, ModelCalls: u.Calls, Cost: schematype.Micros(u.Cost)}
}

// attribution is who paid for a call, shown to an admin holding an API
// token (to match a provider's report) and to nobody else: not to the
// turn's user, not to a scope token.
func attribution(ctx context.Context, c *ent.ModelCall) *string {
	v, err := auth.FromContext(ctx)
	if err != nil || v.Scoped() || !v.Admin || c.Attribution == "" {
		return nil
	}
	return &c.Attribution
}

// promptStats sums what a turn's model calls read. The prefix is one
// call's: the same bytes on every call of the turn.
func promptStats(calls []*ent.ModelCall) *model.PromptStats {
	out := &model.PromptStats{ModelCalls: len(calls)}
	for _, c := range calls {
		out.PrefixTokens = max(out.PrefixTokens, int(c.PrefixTokens))
		out.InputTokens += int(c.InputTokens + c.CacheReadTokens + c.CacheWriteTokens)
		out.CacheReadTokens += int(c.CacheReadTokens)
	}
	return out
}

// byID indexes nodes by id; an id out of the caller's reach maps to nil.
func byID[N any](nodes []N, id func(N) int) map[int]N {
	m := make(map[int]N, len(nodes))
	for _, n := range nodes {
		m[id(n)] = n
	}
	return m
}

// grounding merges the evidence of a turn's calls: per ref, in the order
// the refs were first seen, overlapping and touching spans joined.
func grounding(calls []*ent.ToolCall) *model.Grounding {
	byRef := map[string][]schematype.Span{}
	var order []string
	for _, c := range calls {
		for _, s := range c.Evidence {
			if s.End <= s.Start {
				continue
			}
			if _, seen := byRef[s.Ref]; !seen {
				order = append(order, s.Ref)
			}
			byRef[s.Ref] = append(byRef[s.Ref], s)
		}
	}
	g := &model.Grounding{Sources: []*schematype.Span{}}
	for _, ref := range order {
		spans := byRef[ref]
		slices.SortFunc(spans, func(a, b schematype.Span) int { return cmp.Compare(a.Start, b.Start) })
		cur := spans[0]
		for _, s := range spans[1:] {
			if s.Start <= cur.End {
				cur.End = max(cur.End, s.End)
				continue
			}
			g.Sources = append(g.Sources, &schematype.Span{Ref: cur.Ref, Start: cur.Start, End: cur.End})
			g.CoveredChars += int(cur.End - cur.Start)
			cur = s
		}
		g.Sources = append(g.Sources, &schematype.Span{Ref: cur.Ref, Start: cur.Start, End: cur.End})
		g.CoveredChars += int(cur.End - cur.Start)
	}
	return g
}

// turnsByNumber is a conversation's turns' default order, as the contract
// says: by number, oldest first (the schema's default for orderBy).
var turnsByNumber = []*ent.TurnOrder{{Field: ent.TurnOrderFieldNumber, Direction: entgql.OrderDirectionAsc}}
