package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/application"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/batch"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/events"
	"github.com/toolgate/toolgate/runtime/guard"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/interact"
)

// turnRun is one run of a turn, from start or from where it stopped.
type turnRun struct {
	r      *Runner
	turnID int
	log    *slog.Logger

	turn    *ent.Turn
	conv    *ent.Conversation
	agent   *ent.Agent
	person  prompt.Person
	offered []tools.Definition
	byName  map[string]tools.Definition
	apps    map[string]mcp.Application
	req     model.Request
	// prefixTokens is the stable prefix (system prompt and definitions) in
	// o200k tokens: the same on every call of the turn.
	prefixTokens int
	// nextPosition is the position of the turn's next tool call.
	nextPosition int
}

func (t *turnRun) client() *ent.Client { return t.r.cfg.Client }

func (t *turnRun) run(ctx context.Context) error {
	if err := t.load(ctx); err != nil {
		return err
	}
	if t.turn.Status != turn.StatusRUNNING {
		return nil
	}
	if t.turn.Replayed != (t.r.cfg.Provider.Name() == "replay") {
		if err := t.client().Turn.UpdateOneID(t.turnID).SetReplayed(t.r.cfg.Provider.Name() == "replay").Exec(ctx); err != nil {
			return fmt.Errorf("mark replayed: %w", err)
		}
	}
	// Calls a stopped process left unfinished: nobody knows whether they
	// ran. Say so, on the record and to the model, rather than guess.
	err := t.client().ToolCall.Update().
		Where(toolcall.TurnID(t.turnID), toolcall.OutcomeEQ(toolcall.OutcomePENDING)).
		SetOutcome(toolcall.OutcomeERROR).SetMessage(interrupted).SetHeard("Error: " + interrupted).
		SetFinishedAt(t.r.cfg.Now()).Exec(ctx)
	if err != nil {
		return fmt.Errorf("close interrupted calls: %w", err)
	}
	steps, err := t.history(ctx)
	if err != nil {
		return err
	}
	for step := steps; step < t.r.cfg.MaxSteps; step++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := t.callModel(ctx, step)
		if err != nil {
			return err
		}
		if len(resp.ToolCalls) == 0 {
			t.finish(turn.StatusCOMPLETED, &resp.Text, "")
			return nil
		}
		t.req.Messages = append(t.req.Messages, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		paused, err := t.runTools(ctx, step, resp.ToolCalls)
		if err != nil {
			return err
		}
		if paused {
			return nil
		}
		// The step is finished: a limit it crossed stops the turn here,
		// before another model call spends more.
		if b := t.r.cfg.Budget; b != nil {
			if err := b(ctx, t.conv.OrganizationID, t.conv.UserID, t.r.cfg.Now()); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("step limit reached: %d model calls without a final answer", t.r.cfg.MaxSteps)
}

// load reads the turn and what it belongs to, and fixes its tools.
func (t *turnRun) load(ctx context.Context) error {
	c := t.client()
	var err error
	if t.turn, err = c.Turn.Get(ctx, t.turnID); err != nil {
		return fmt.Errorf("load turn: %w", err)
	}
	t.conv, err = c.Conversation.Query().
		Where(conversation.ID(t.turn.ConversationID)).
		WithAgent().WithUser(func(q *ent.UserQuery) { q.WithOrganization() }).
		Only(ctx)
	if err != nil {
		return fmt.Errorf("load conversation: %w", err)
	}
	if t.agent, err = t.fixAgent(ctx, t.conv.Edges.Agent); err != nil {
		return err
	}
	u := t.conv.Edges.User
	t.person = prompt.Person{Name: u.Name, Department: u.Department, Organization: u.Edges.Organization.Name}

	appDefs, err := t.applicationTools(ctx)
	if err != nil {
		return err
	}
	rules := catalog.RulesOf(t.agent, u.Edges.Organization, t.r.cfg.WebProvider)
	t.offered = prompt.Register(rules, t.r.cfg.Tools, appDefs)
	t.byName = make(map[string]tools.Definition, len(t.offered))
	for _, d := range t.offered {
		t.byName[d.Name] = d
	}
	t.req = model.Request{
		System:      prompt.System(t.agent, t.offered),
		Tools:       prompt.Specs(t.offered),
		MaxTokens:   t.r.cfg.MaxTokens,
		Attribution: t.attribution(),
	}
	t.prefixTokens = catalog.PrefixTokens(t.req.System, t.offered)
	return nil
}

// fixAgent returns the agent as the turn first ran with it: the first run
// records its instructions, tools and switches on the turn, and every later
// run (after a clarification, a restart) uses that record, so updateAgent
// never changes a turn in progress.
func (t *turnRun) fixAgent(ctx context.Context, current *ent.Agent) (*ent.Agent, error) {
	a := *current
	if cfg := t.turn.AgentConfig; cfg != nil {
		a.Instructions, a.Tools = cfg.Instructions, cfg.Tools
		a.Memory, a.BudgetCheck, a.PastConversationSearch = cfg.Memory, cfg.BudgetCheck, cfg.PastConversationSearch
		return &a, nil
	}
	cfg := &schematype.AgentConfig{Instructions: a.Instructions, Tools: a.Tools, Memory: a.Memory,
		BudgetCheck: a.BudgetCheck, PastConversationSearch: a.PastConversationSearch}
	if err := t.client().Turn.UpdateOneID(t.turnID).SetAgentConfig(cfg).Exec(ctx); err != nil {
		return nil, fmt.Errorf("record the turn's agent: %w", err)
	}
	return &a, nil
}

// attribution is who pays for the turn's calls, as the ids the API shows.
func (t *turnRun) attribution() model.Attribution {
	id := t.r.cfg.EncodeID
	if id == nil {
		id = strconv.Itoa
	}
	return model.Attribution{Organization: id(t.conv.OrganizationID), User: id(t.conv.UserID),
		Agent: id(t.conv.AgentID), Conversation: id(t.conv.ID)}
}

// applicationTools lists the tools of the applications the agent names in
// its allowlist. An application that cannot be reached offers nothing this
// turn; the turn goes on without it.
func (t *turnRun) applicationTools(ctx context.Context) ([]tools.Definition, error) {
	t.apps = map[string]mcp.Application{}
	if t.r.cfg.Apps == nil {
		return nil, nil
	}
	wanted := map[string]bool{}
	for _, name := range t.agent.Tools {
		if app, _, ok := mcp.SplitToolName(name); ok {
			wanted[app] = true
		}
	}
	if len(wanted) == 0 {
		return nil, nil
	}
	rows, err := t.client().Application.Query().
		Where(application.OrganizationID(t.conv.OrganizationID)).
		Order(ent.Asc(application.FieldName)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load applications: %w", err)
	}
	var defs []tools.Definition
	for _, row := range rows {
		if !wanted[row.Name] {
			continue
		}
		app := mcp.Application{Name: row.Name, URL: row.URL, AllowedTools: row.AllowedTools}
		t.apps[row.Name] = app
		ds, err := t.r.cfg.Apps.Tools(ctx, app)
		if err != nil {
			t.log.Warn("application not offered this turn", "application", row.Name, "err", err)
			continue
		}
		defs = append(defs, ds...)
	}
	return defs, nil
}

// history builds the messages: earlier turns, this turn's message, and the
// steps this turn already took. It returns how many model calls were made.
func (t *turnRun) history(ctx context.Context) (int, error) {
	c := t.client()
	turns, err := c.Turn.Query().
		Where(turn.ConversationID(t.conv.ID), turn.NumberLT(t.turn.Number)).
		Order(ent.Asc(turn.FieldNumber)).
		Select(turn.FieldID, turn.FieldNumber, turn.FieldStartedAt, turn.FieldTimeZone,
			turn.FieldUserText, turn.FieldAnswer, turn.FieldStatus).
		All(ctx)
	if err != nil {
		return 0, fmt.Errorf("load earlier turns: %w", err)
	}
	ids := make([]int, 0, len(turns)+1)
	for _, pt := range turns {
		ids = append(ids, pt.ID)
	}
	ids = append(ids, t.turnID)
	steps, err := t.steps(ctx, ids)
	if err != nil {
		return 0, err
	}
	sizes, err := t.sizes(ctx, steps)
	if err != nil {
		return 0, err
	}
	past := make([]prompt.Past, len(turns))
	for i, pt := range turns {
		past[i] = prompt.Past{Turn: pt, Steps: steps[pt.ID], Sizes: sizes, CallsPerTurn: t.r.cfg.CallsPerTurn}
	}
	msgs := prompt.History(t.person, past)
	msgs = append(msgs, model.Message{Role: model.RoleUser,
		Text: prompt.UserMessage(t.person, t.turn.StartedAt, t.turn.TimeZone, t.turn.UserText)})
	own := steps[t.turnID]
	for _, st := range own {
		if len(st.Calls) == 0 {
			continue
		}
		am := model.Message{Role: model.RoleAssistant, Text: st.Text}
		for _, call := range st.Calls {
			am.ToolCalls = append(am.ToolCalls, model.ToolCall{ID: prompt.CallID(call), Name: call.Name, Arguments: []byte(call.Arguments)})
		}
		msgs = append(msgs, am)
		for _, call := range st.Calls {
			heard := ""
			if call.Heard != nil {
				heard = *call.Heard
			}
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: prompt.CallID(call), ToolName: call.Name, Text: heard,
				IsError: call.Outcome != toolcall.OutcomeHITS && call.Outcome != toolcall.OutcomeABSENCE})
			t.nextPosition = max(t.nextPosition, call.Position+1)
		}
	}
	t.req.Messages = msgs
	return len(own), nil
}

// steps loads the model calls and tool calls of turns, grouped by turn and
// step, in two statements.
func (t *turnRun) steps(ctx context.Context, turnIDs []int) (map[int][]prompt.Step, error) {
	c := t.client()
	mcs, err := c.ModelCall.Query().
		Where(modelcall.TurnIDIn(turnIDs...), modelcall.KindEQ(modelcall.KindSTEP)).
		Order(ent.Asc(modelcall.FieldTurnID), ent.Asc(modelcall.FieldStep)).
		Select(modelcall.FieldTurnID, modelcall.FieldStep, modelcall.FieldText).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load model calls: %w", err)
	}
	// What the model heard is read only for the turns that replay it: the
	// last few and this one. Older calls replay their outcome and ref.
	calls, err := c.ToolCall.Query().
		Where(toolcall.TurnIDIn(turnIDs...)).
		Order(ent.Asc(toolcall.FieldTurnID), ent.Asc(toolcall.FieldPosition)).
		Select(callColumns...).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load tool calls: %w", err)
	}
	recent := turnIDs[max(0, len(turnIDs)-prompt.RecentTurns-1):]
	var heard []struct {
		ID    int     `json:"id"`
		Heard *string `json:"heard"`
	}
	err = c.ToolCall.Query().Where(toolcall.TurnIDIn(recent...)).
		Select(toolcall.FieldID, toolcall.FieldHeard).Scan(ctx, &heard)
	if err != nil {
		return nil, fmt.Errorf("load what was heard: %w", err)
	}
	byID := make(map[int]*string, len(heard))
	for _, h := range heard {
		byID[h.ID] = h.Heard
	}
	for _, call := range calls {
		call.Heard = byID[call.ID]
	}
	out := map[int][]prompt.Step{}
	for _, mc := range mcs {
		for len(out[mc.TurnID]) <= mc.Step {
			out[mc.TurnID] = append(out[mc.TurnID], prompt.Step{})
		}
		out[mc.TurnID][mc.Step].Text = mc.Text
	}
	for _, call := range calls {
		for len(out[call.TurnID]) <= call.Step {
			out[call.TurnID] = append(out[call.TurnID], prompt.Step{})
		}
		out[call.TurnID][call.Step].Calls = append(out[call.TurnID][call.Step].Calls, call)
	}
	return out, nil
}

// interrupted is what a call cut off by a stop is recorded as.
const interrupted = "interrupted: the runtime stopped while this call was in flight; it may or may not have run"

// callColumns are the tool call columns the history needs, but what the
// model heard, which can be kilobytes per call. Evidence stays: the cap on
// calls per turn keeps the calls the model was shown first.
var callColumns = slices.DeleteFunc(slices.Clone(toolcall.Columns), func(c string) bool {
	return c == toolcall.FieldHeard
})

// sizes returns the character counts of the results the calls stored, by
// ref, in one statement by primary key.
func (t *turnRun) sizes(ctx context.Context, steps map[int][]prompt.Step) (map[string]int64, error) {
	var ids []int
	for _, st := range steps {
		for _, s := range st {
			for _, c := range s.Calls {
				if c.ResultID != nil {
					ids = append(ids, *c.ResultID)
				}
			}
		}
	}
	var rows []struct {
		Ref   string `json:"ref"`
		Chars int64  `json:"chars"`
	}
	if len(ids) > 0 {
		err := t.client().StoredResult.Query().
			Where(storedresult.IDIn(ids...)).
			Select(storedresult.FieldRef, storedresult.FieldChars).
			Scan(ctx, &rows)
		if err != nil {
			return nil, fmt.Errorf("load result sizes: %w", err)
		}
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Ref] = r.Chars
	}
	return out, nil
}

// callModel makes one model call and records it.
func (t *turnRun) callModel(ctx context.Context, step int) (*model.Response, error) {
	t.publish(events.ModelCallStarted, 0)
	start := t.r.cfg.Now()
	resp, err := t.r.cfg.Provider.Complete(ctx, t.req)
	elapsed := t.r.cfg.Now().Sub(start)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("model provider: %w", err)
	}
	name := resp.Model
	if name == "" {
		name = t.req.Model
	}
	cost, _ := t.r.cfg.Prices.Cost(name, resp.Usage)
	u := t.conv.Edges.User
	err = t.client().ModelCall.Create().
		SetTurnID(t.turnID).SetOrganizationID(t.conv.OrganizationID).SetAgentID(t.conv.AgentID).SetUserID(u.ID).
		SetStep(step).SetText(resp.Text).
		SetProvider(t.r.cfg.Provider.Name()).SetModel(name).
		SetInputTokens(resp.Usage.InputUncached).SetCacheReadTokens(resp.Usage.CacheRead).
		SetCacheWriteTokens(resp.Usage.CacheWrite).SetOutputTokens(resp.Usage.Output).
		SetCost(cost).SetDurationMs(elapsed.Milliseconds()).SetStartedAt(start).
		SetPrefixTokens(int64(t.prefixTokens)).SetAttribution(t.req.Attribution.Key()).
		Exec(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("record model call: %w", err)
	}
	if resp.Thinking != "" {
		thinking := resp.Thinking
		if t.turn.Thinking != nil {
			thinking = *t.turn.Thinking + "\n\n" + thinking
		}
		t.turn.Thinking = &thinking
		if err := t.client().Turn.UpdateOneID(t.turnID).SetThinking(thinking).Exec(context.WithoutCancel(ctx)); err != nil {
			return nil, fmt.Errorf("record thinking: %w", err)
		}
	}
	t.publish(events.ModelCallFinished, 0)
	return resp, nil
}

// finish ends the turn. It writes with a context of its own: a cancelled
// turn must still be recorded as cancelled.
func (t *turnRun) finish(status turn.Status, answer *string, reason string) {
	// Its own context: the turn's may be cancelled, and the end is still recorded.
	ctx, cancel := context.WithTimeout(tenancy.System(context.Background()), 10*time.Second)
	defer cancel()
	u := t.client().Turn.Update().
		Where(turn.ID(t.turnID), turn.StatusIn(turn.StatusRUNNING, turn.StatusWAITING_FOR_CLARIFICATION)).
		SetStatus(status).SetFinishedAt(t.r.cfg.Now())
	if answer != nil {
		u.SetAnswer(*answer)
	}
	if reason != "" && status != turn.StatusCOMPLETED {
		u.SetError(reason)
	}
	if _, err := u.Save(ctx); err != nil {
		t.log.Error("record turn end", "err", err)
		return
	}
	if err := t.client().Conversation.UpdateOneID(t.turn.ConversationID).SetUpdatedAt(t.r.cfg.Now()).Exec(ctx); err != nil {
		t.log.Warn("touch conversation", "err", err)
	}
	if answer != nil {
		t.publish(events.Answer, 0)
	}
	t.publish(events.Status, 0)
}

func (t *turnRun) publish(kind events.Kind, toolCallID int) {
	t.r.cfg.Events.Publish(events.Event{Kind: kind, TurnID: t.turnID, ToolCallID: toolCallID, At: t.r.cfg.Now()})
}

// runTools carries out one model answer's calls, at most Concurrency at a
// time and in the order their resources need (batch.Plan), and appends
// what the model hears. It reports whether the turn now
// waits for the user.
func (t *turnRun) runTools(ctx context.Context, step int, calls []model.ToolCall) (bool, error) {
	token, err := t.r.cfg.Signer.Mint(scope.Claims{
		OrganizationID: t.conv.OrganizationID, UserID: t.conv.UserID, AgentID: t.conv.AgentID,
		ConversationID: t.conv.ID, TurnID: t.turnID, Tools: names(t.offered),
	})
	if err != nil {
		return false, fmt.Errorf("mint scope token: %w", err)
	}
	s := dispatch.Scope{TurnID: t.turnID, ConversationID: t.conv.ID, Token: token, Offered: t.byName, Apps: t.apps}
	if t.r.cfg.EncodeID != nil {
		s.ConversationRef = t.r.cfg.EncodeID(t.conv.ID)
	}

	rows := make([]*ent.ToolCall, len(calls))
	creates := make([]*ent.ToolCallCreate, len(calls))
	for i, c := range calls {
		creates[i] = t.client().ToolCall.Create().
			SetTurnID(t.turnID).SetPosition(t.nextPosition + i).SetStep(step).
			SetCallID(c.ID).SetName(c.Name).SetArguments(string(c.Arguments)).
			SetStartedAt(t.r.cfg.Now())
	}
	rows, err = t.client().ToolCall.CreateBulk(creates...).Save(context.WithoutCancel(ctx))
	if err != nil {
		return false, fmt.Errorf("record tool calls: %w", err)
	}
	t.nextPosition += len(calls)

	heard := make([]string, len(calls))
	failed := make([]bool, len(calls))
	sent := make([]json.RawMessage, len(calls))
	errs := make([]error, len(calls))
	defs := make([]tools.Definition, len(calls))
	for i, c := range calls {
		defs[i] = t.byName[c.Name]
	}
	batch.Run(batch.Plan(defs), t.r.cfg.Concurrency, func(i int) {
		t.publish(events.ToolCallStarted, rows[i].ID)
		heard[i], failed[i], sent[i], errs[i] = t.runTool(ctx, s, rows[i], calls[i])
		t.publish(events.ToolCallFinished, rows[i].ID)
	})
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	// From here on every reader of the calls' arguments (the next model
	// call, the pause, a resume rebuilding this turn) reads them as repaired
	// and sent, never as the model first wrote them.
	t.repaired(calls, sent)
	pause := -1
	for i, c := range calls {
		t.req.Messages = append(t.req.Messages, model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Text: heard[i], IsError: failed[i]})
		if t.byName[c.Name].Pauses && !failed[i] && pause < 0 {
			pause = i
		}
	}
	if pause >= 0 {
		if err := t.pause(ctx, sent[pause]); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, ctx.Err()
}

// repaired puts the arguments as sent in place of the model's own in the
// answer that asked for calls, the turn's last assistant message: the
// model's next call then reads what a resumed turn reads from the store.
func (t *turnRun) repaired(calls []model.ToolCall, sent []json.RawMessage) {
	for i := len(t.req.Messages) - 1; i >= 0; i-- {
		m := &t.req.Messages[i]
		if m.Role != model.RoleAssistant {
			continue
		}
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for j := range m.ToolCalls {
			if j < len(calls) && m.ToolCalls[j].ID == calls[j].ID && len(sent[j]) > 0 {
				m.ToolCalls[j].Arguments = sent[j]
			}
		}
		return
	}
}

// runTool carries out one call and records it. It returns what the model
// hears, whether the call failed, and the arguments as repaired and sent.
func (t *turnRun) runTool(ctx context.Context, s dispatch.Scope, row *ent.ToolCall, c model.ToolCall) (string, bool, json.RawMessage, error) {
	res := t.r.cfg.Dispatcher.Do(ctx, s, dispatch.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	heard, failed, err := t.record(ctx, row, c, res)
	return heard, failed, res.Arguments, err
}

// record stores the call's result and what the model hears, in one
// transaction.
func (t *turnRun) record(ctx context.Context, row *ent.ToolCall, c model.ToolCall, res dispatch.Result) (string, bool, error) {
	def := t.byName[c.Name]
	ctx = context.WithoutCancel(ctx)
	tx, err := t.client().Tx(ctx)
	if err != nil {
		return "", false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var (
		ref     string
		visible []schematype.Span
	)
	upd := tx.ToolCall.UpdateOneID(row.ID).
		SetArguments(string(res.Arguments)).SetOutcome(toolcall.Outcome(res.Outcome)).SetAttempts(res.Attempts).
		SetFailures(nonNilFailures(res.Failures)).SetRepairs(nonNilRepairs(res.Repairs)).SetFinishedAt(t.r.cfg.Now())
	// Every outcome is stored under a ref, so read_tool_result and the
	// transcript can reopen any call: a result whole, and for a refusal,
	// an error, an outage or a call that may have run, what the model was
	// told of it.
	ref, err = newRef()
	if err != nil {
		return "", false, err
	}
	stored := res
	if res.Outcome != dispatch.Hits && res.Outcome != dispatch.Absence {
		told, err := dispatch.Render(res, def, ref, false)
		if err != nil {
			return "", false, err
		}
		stored = dispatch.Result{Kind: schematype.KindText, Content: []byte(told.Text)}
	}
	sr, err := storeResult(ctx, tx.Client(), t.conv.ID, ref, stored)
	if err != nil {
		return "", false, err
	}
	upd.SetRef(ref).SetResultID(sr.ID)
	if res.Message != "" {
		upd.SetMessage(res.Message)
	}
	// Later turns replay arguments cut (prompt.CapArguments): keep them
	// whole under a ref of their own, so the line beside the cut can name
	// where to read them.
	if _, cuts := prompt.CapArguments(string(res.Arguments)); len(cuts) > 0 {
		aref, err := newRef()
		if err != nil {
			return "", false, err
		}
		args := dispatch.Result{Kind: schematype.KindJSON, Content: res.Arguments}
		if _, err := storeResult(ctx, tx.Client(), t.conv.ID, aref, args); err != nil {
			return "", false, fmt.Errorf("store arguments: %w", err)
		}
		upd.SetArgumentsRef(aref)
	}
	h, err := dispatch.Render(res, def, ref, res.TruncatedAtSource)
	if err != nil {
		return "", false, err
	}
	// Instruction-like text in what the model hears is marked where it
	// stands and recorded on the call; the backend's scope checks stay the
	// defence.
	if why := guard.Check(h.Text); why != "" {
		upd.SetGuardrail(why)
		h.Text = guard.Line(why) + "\n" + h.Text
	}
	// Evidence: what this call showed of other results, and the part of its
	// own result the model received. Saved write inputs and failed reads
	// show nothing.
	// A result that names its evidence (a read of other results) is
	// judged by it; otherwise what the model saw of this result counts.
	// An acknowledgement (a write's receipt, the task list, suggestions,
	// clarify) is no evidence of anything: only previews and returned
	// windows of results count.
	if !def.Acknowledges() {
		visible = append(visible, res.Evidence...)
	}
	if res.Outcome == dispatch.Hits && len(res.Evidence) == 0 && !def.Acknowledges() {
		for _, v := range h.Visible {
			visible = append(visible, schematype.Span{Ref: ref, Start: v.Start, End: v.End})
		}
	}
	upd.SetHeard(h.Text).SetEvidence(nonNilSpans(visible))
	if err := upd.Exec(ctx); err != nil {
		return "", false, fmt.Errorf("record tool call: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", false, fmt.Errorf("commit tool call: %w", err)
	}
	failed := res.Outcome != dispatch.Hits && res.Outcome != dispatch.Absence
	return h.Text, failed, nil
}

// pause stores the clarification the model asked for and leaves the turn
// waiting for the user's answer. args are the clarify call's arguments as
// repaired and sent: the ones the tool itself accepted.
func (t *turnRun) pause(ctx context.Context, args json.RawMessage) error {
	c, err := interact.ParseClarify(args)
	if err != nil {
		return fmt.Errorf("read clarification: %w", err)
	}
	cl := schematype.Clarification{Question: c.Question, Options: c.Options, Recommended: c.Recommended}
	if cl.Options == nil {
		cl.Options = []string{}
	}
	n, err := t.client().Turn.Update().
		Where(turn.ID(t.turnID), turn.StatusEQ(turn.StatusRUNNING)).
		SetStatus(turn.StatusWAITING_FOR_CLARIFICATION).SetClarification(&cl).
		Save(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("pause for clarification: %w", err)
	}
	if n == 1 {
		t.publish(events.Status, 0)
	}
	return nil
}

func names(defs []tools.Definition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

func nonNilFailures(f []schematype.ItemFailure) []schematype.ItemFailure {
	if f == nil {
		return []schematype.ItemFailure{}
	}
	return f
}

func nonNilSpans(s []schematype.Span) []schematype.Span {
	if s == nil {
		return []schematype.Span{}
	}
	return s
}

func nonNilRepairs(r []schematype.Repair) []schematype.Repair {
	if r == nil {
		return []schematype.Repair{}
	}
	return r
}
