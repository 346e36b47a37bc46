package loop

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/application"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/predicate"
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
	"github.com/toolgate/toolgate/runtime/meter"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/runtime/retry"
	"github.com/toolgate/toolgate/runtime/scope"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/embed"
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
	// appRows are the applications' rows, by name: their approval rules.
	appRows map[string]*ent.Application
	// notes are told the model ahead of a call's result, by call: how a
	// person changed its arguments.
	notes map[int]string
	req   model.Request
	// prefixTokens is the stable prefix (system prompt and definitions) in
	// o200k tokens: the same on every call of the turn.
	prefixTokens int
	// nextPosition is the position of the turn's next tool call.
	nextPosition int
	// modelCtx is cancelled when a drain starts: a model call in flight
	// is given up (it changes nothing), tool calls are let finish.
	modelCtx context.Context
	// tail is the turn's last recorded step, where a resumed run picks up.
	tail *prompt.Step
	// span is the run's root span; it records nothing when untraced.
	span trace.Span
	// finished: the final answer's step ended the turn in its own
	// transaction (callModel).
	finished bool
	// recs writes the records of the step's tool calls.
	recs recorder
	// loaded is the turn as its claim loaded it (PostgreSQL), or nil.
	loaded *loaded
	// limited: a monthly limit of the organisation or the user was set
	// when the run loaded the turn (readTurn).
	limited bool
	// userActiveAt is when the run's load read the turn's user active;
	// zero when deactivated.
	userActiveAt time.Time
	// unrecordedAgent is the agent this run uses, until the turn records it
	// (recordAgent): nil when the turn had recorded one already.
	unrecordedAgent *schematype.AgentConfig
	// deferred names the offered tools sent as stubs (prompt.Offer) whose
	// definitions the turn has not read yet (readDefinitions): calls to
	// them are refused.
	deferred map[string]bool
}

func (t *turnRun) client() *ent.Client { return t.r.cfg.Client }

func (t *turnRun) run(ctx context.Context) error {
	if err := t.load(ctx); err != nil {
		return err
	}
	if t.turn.Status != turn.StatusRUNNING {
		return nil
	}
	if err := t.traceRun(ctx); err != nil {
		return err
	}
	if t.turn.AgentConfig == nil { // its agent is recorded on its first run
		t.r.meter.TurnStarted()
	}
	if t.turn.Replayed != (t.r.cfg.Provider.Name() == "replay") {
		if err := t.client().Turn.Update().Where(turn.ID(t.turnID)).SetReplayed(t.r.cfg.Provider.Name() == "replay").Exec(ctx); err != nil {
			return fmt.Errorf("mark replayed: %w", err)
		}
	}
	steps, err := t.history(ctx, true)
	if err != nil {
		return err
	}
	// Pick up where the last run stopped: a step recorded is never asked
	// of the model again.
	if tail := t.tail; tail != nil {
		switch {
		case len(tail.Calls) == 0:
			// The answer was recorded, the turn's end was not.
			t.finish(turn.StatusCOMPLETED, &tail.Text, "")
			return nil
		case pending(tail.Calls):
			paused, err := t.runTools(ctx, steps-1, tail.Calls, true)
			if err != nil || paused {
				return err
			}
		case t.unanswered(tail.Calls):
			// The question was recorded, the pause was not.
			return t.pause(ctx, tail.Calls)
		}
	}
	for step := steps; step < t.r.cfg.MaxSteps; step++ {
		if t.r.draining.Load() {
			return errStopped
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, rows, err := t.callModel(ctx, step)
		if err != nil {
			return err
		}
		if len(resp.ToolCalls) == 0 {
			if !t.finished {
				// Not ended with its answer (cancelled meanwhile): finish
				// says so, as for any other end.
				t.finish(turn.StatusCOMPLETED, &resp.Text, "")
			}
			return nil
		}
		t.req.Messages = append(t.req.Messages, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		paused, err := t.runTools(ctx, step, rows, false)
		if err != nil {
			return err
		}
		if paused {
			return nil
		}
		// The step is finished: a limit it crossed stops the turn here,
		// before another model call spends more. Without a limit when the
		// run loaded the turn, there is nothing to cross: a limit set
		// meanwhile holds from the next turn (sendMessage checks it).
		if b := t.r.cfg.Budget; b != nil && t.limited {
			stop, err := b(ctx, t.conv.OrganizationID, t.conv.UserID, t.r.cfg.Now())
			if err != nil {
				return fmt.Errorf("check budgets: %w", err)
			}
			if stop != "" {
				return shown(errors.New(stop))
			}
		}
	}
	return shown(fmt.Errorf("step limit reached: %d model calls without a final answer", t.r.cfg.MaxSteps))
}

// pending reports whether any of a step's calls was left unfinished.
func pending(calls []*ent.ToolCall) bool {
	return slices.ContainsFunc(calls, func(c *ent.ToolCall) bool { return c.Outcome == schematype.OutcomePending })
}

// unanswered reports whether the step asked the user a question that the
// turn has not recorded as asked and answered: the run stopped between
// recording the question and pausing.
func (t *turnRun) unanswered(calls []*ent.ToolCall) bool {
	i := t.pausing(calls)
	return i >= 0 && !interact.Answered(t.turn.Clarification, calls[i])
}

// pausing returns the index of the first call of a step that pauses the
// turn and succeeded, or -1.
func (t *turnRun) pausing(calls []*ent.ToolCall) int {
	return interact.Asking(calls, func(name string) bool { return t.byName[name].Pauses })
}

// loaded is what the claim's statement read of the turn (claimAndLoad):
// the turn and its conversation are set on the run, these are the rest.
type loaded struct {
	attached, readable bool
	// err: the row was claimed but could not be decoded.
	err error
}

// load reads the turn and what it belongs to, and fixes its tools.
func (t *turnRun) load(ctx context.Context) error {
	c := t.client()
	var attached, readable bool
	if l := t.loaded; l != nil {
		if l.err != nil {
			return l.err
		}
		attached, readable = l.attached, l.readable
	} else {
		var err error
		if attached, readable, err = t.loadTurn(ctx); err != nil {
			return err
		}
	}
	t.agent = t.fixAgent(t.conv.Edges.Agent)
	t.log = t.log.With("conversation", t.r.apiID(t.conv.ID))
	u := t.conv.Edges.User
	if u.DeactivatedAt == nil {
		t.userActiveAt = time.Now()
	}
	t.person = prompt.Person{Name: u.Name, Department: u.Department, Organization: u.Edges.Organization.Name}

	appDefs, err := t.applicationTools(ctx)
	if err != nil {
		return err
	}
	rules, err := catalog.LoadRules(ctx, c, t.agent, u.Edges.Organization, catalog.Server{WebProvider: t.r.cfg.WebProvider,
		Embeddings: t.r.cfg.Embeddings || t.r.cfg.Embedder != nil, EmbeddingsDown: embed.Down(t.r.cfg.Embedder), Browser: t.r.cfg.Browser, Rates: t.r.cfg.Rates})
	if err != nil {
		return err
	}
	rules.Attachments, rules.DocumentAttachments = attached, readable
	deck := prompt.Offer(rules, t.r.cfg.Tools, appDefs)
	t.offered = deck.Offered
	t.byName = make(map[string]tools.Definition, len(t.offered))
	t.deferred = nil
	if deck.Deferred {
		t.deferred = map[string]bool{}
	}
	for _, d := range t.offered {
		t.byName[d.Name] = d
		if deck.Deferred && !catalog.Keeps(d) {
			t.deferred[d.Name] = true
		}
	}
	t.req = model.Request{
		System:      prompt.System(t.agent, t.offered, deck.Deferred),
		Tools:       prompt.Specs(deck.Sent),
		MaxTokens:   t.r.cfg.MaxTokens,
		Attribution: t.attribution(),
	}
	t.prefixTokens = catalog.PrefixTokens(t.req.System, deck.SentTokens)
	return nil
}

// fixAgent returns the agent as the turn first ran with it: the first run
// records its instructions, tools and switches on the turn with its first
// write (recordAgent), and every later run (after a clarification, a
// restart) uses that record, so updateAgent never changes a turn in
// progress.
func (t *turnRun) fixAgent(current *ent.Agent) *ent.Agent {
	a := *current
	if cfg := t.turn.AgentConfig; cfg != nil {
		a.Instructions, a.Tools = cfg.Instructions, cfg.Tools
		a.Memory, a.BudgetCheck, a.PastConversationSearch = cfg.Memory, cfg.BudgetCheck, cfg.PastConversationSearch
		a.Skills = cfg.Skills
		a.Approvals = cfg.Approvals
		a.ToolLoading = agent.ToolLoading(cfg.ToolLoading)
		if a.ToolLoading == "" {
			a.ToolLoading = agent.ToolLoadingAUTO
		}
		return &a
	}
	t.unrecordedAgent = &schematype.AgentConfig{Instructions: a.Instructions, Tools: a.Tools, Memory: a.Memory,
		BudgetCheck: a.BudgetCheck, PastConversationSearch: a.PastConversationSearch, Skills: a.Skills, ToolLoading: string(a.ToolLoading),
		Approvals: a.Approvals}
	return &a
}

// recordAgent adds the agent the run uses to the turn's update, when the
// turn has not recorded one yet: the run's first write (its first step, a
// summary, a pause) records it with its claim check, in the same statement,
// and before any tool call can ask for it. A run that writes nothing
// leaves it unrecorded, as it leaves nothing a later run must agree with.
// It reports whether the update records it.
func (t *turnRun) recordAgent(u *ent.TurnUpdate) bool {
	if t.unrecordedAgent == nil {
		return false
	}
	u.SetAgentConfig(t.unrecordedAgent)
	return true
}

// attribution is who pays for the turn's calls, as opaque keyed ids.
func (t *turnRun) attribution() model.Attribution {
	return model.Attribute(t.r.cfg.AttributionKey, t.conv.OrganizationID, t.conv.UserID, t.conv.AgentID, t.conv.ID)
}

// applicationTools lists the tools of the applications the agent names in
// its allowlist. An application that cannot be reached offers nothing this
// turn; the turn goes on without it.
func (t *turnRun) applicationTools(ctx context.Context) ([]tools.Definition, error) {
	t.apps = map[string]mcp.Application{}
	t.appRows = map[string]*ent.Application{}
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
		t.appRows[row.Name] = row
		ds, err := t.r.cfg.Apps.Tools(ctx, app)
		if err != nil {
			t.log.Warn("application not offered this turn", "application", row.Name, "err", err)
			continue
		}
		defs = append(defs, ds...)
	}
	return defs, nil
}

// history builds the messages: the summaries that stand for the oldest
// earlier turns, the turns after them, this turn's message, and the steps
// this turn already took. It returns how many model calls were made. With
// compact, a turn that has made no model call yet first summarises the
// oldest turns when the history passes its budget (compaction); a turn
// under way keeps the history it started with.
func (t *turnRun) history(ctx context.Context, compact bool) (int, error) {
	past, err := t.readPast(ctx)
	if err != nil {
		return 0, err
	}
	chain, turns, steps, sizes := past.chain, past.turns, past.steps, past.sizes
	live := make([]prompt.NumberedTurn, len(turns))
	for i, pt := range turns {
		past := prompt.Past{Turn: pt, Steps: steps[pt.ID], Sizes: sizes, CallsPerTurn: t.r.cfg.CallsPerTurn}
		live[i] = prompt.NumberedTurn{Number: pt.Number, Turn: pt,
			Messages: prompt.TurnMessages(t.person, past, len(turns)-i <= prompt.RecentTurns)}
	}
	if compact && len(steps[t.turnID]) == 0 {
		if chain, live, err = t.compact(ctx, chain, live); err != nil {
			return 0, err
		}
	}
	msgs := layout(chain, live, t.r.cfg.HistoryBudget)
	msgs = append(msgs, model.Message{Role: model.RoleUser,
		Text: prompt.UserMessage(t.person, t.turn.StartedAt, t.turn.TimeZone, t.turn.UserText)})
	own := steps[t.turnID]
	if len(own) > 0 {
		t.tail = &own[len(own)-1]
	}
	images, err := t.ownImages(ctx, own)
	if err != nil {
		return 0, err
	}
	for i, st := range own {
		for _, call := range st.Calls {
			t.nextPosition = max(t.nextPosition, call.Position+1)
		}
		if len(st.Calls) == 0 {
			continue
		}
		am := model.Message{Role: model.RoleAssistant, Text: st.Text}
		for _, call := range st.Calls {
			am.ToolCalls = append(am.ToolCalls, model.ToolCall{ID: prompt.CallID(call), Name: call.Name, Arguments: []byte(call.Arguments)})
		}
		msgs = append(msgs, am)
		if i == len(own)-1 && pending(st.Calls) {
			// The resumed run finishes this step and says each call in order.
			break
		}
		for _, call := range st.Calls {
			heard := ""
			if call.Heard != nil {
				heard = *call.Heard
			}
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: prompt.CallID(call), ToolName: call.Name, Text: heard,
				IsError: !call.Outcome.Succeeded(), Images: images[call.ID]})
			if call.Outcome == schematype.OutcomeHits {
				t.readDefinitions(call.Name, heard)
			}
		}
	}
	t.req.Messages = msgs
	return len(own), nil
}

// ownImages reads the images of this turn's own calls that gave non-text
// media, by call, for a model that takes images: a resumed turn shows the
// model what its first run showed. Earlier turns replay their words only.
func (t *turnRun) ownImages(ctx context.Context, own []prompt.Step) (map[int][]model.Image, error) {
	if !model.TakesImages(t.r.cfg.Provider, t.req.Model) {
		return nil, nil
	}
	byResult := map[int]int{}
	for _, st := range own {
		for _, c := range st.Calls {
			if c.ResultID != nil && c.Outcome == schematype.OutcomeHits && t.byName[c.Name].Media {
				byResult[*c.ResultID] = c.ID
			}
		}
	}
	if len(byResult) == 0 {
		return nil, nil
	}
	rows, err := t.client().StoredResult.Query().
		Where(storedresult.IDIn(slices.Collect(maps.Keys(byResult))...), storedresult.KindEQ(schematype.KindMedia)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load images: %w", err)
	}
	out := make(map[int][]model.Image, len(rows))
	for _, r := range rows {
		_, images, _ := dispatch.Media(r.Content)
		out[byResult[r.ID]] = images
	}
	return out, nil
}

// interrupted is what a call cut off by a stop is recorded as.
const interrupted = "interrupted: the runtime stopped while this call was in flight"

// callModel makes one model call and records it with the calls it asks
// for, in one transaction: a step is recorded whole or not at all, so a
// resumed run knows a recorded step with no calls for the final answer and
// carries out the calls of one that has them, never asking again.
func (t *turnRun) callModel(ctx context.Context, step int) (*model.Response, []*ent.ToolCall, error) {
	t.publish(events.Event{Kind: events.ModelCallStarted, Step: step, Status: string(turn.StatusRUNNING)})
	start := t.r.cfg.Now()
	mctx := ctx
	if t.modelCtx != nil {
		mctx = t.modelCtx
	}
	mctx, span := t.startModelCall(mctx, step)
	// Subscribers read the answer as the provider reads it; the stream
	// ends once the step is recorded, before its MODEL_CALL_FINISHED.
	stream := t.r.cfg.Events.Begin(t.turnID, step)
	defer stream.End()
	req := t.req
	req.Stream = stream
	resp, err := t.r.cfg.Provider.Complete(mctx, req)
	elapsed := t.r.cfg.Now().Sub(start)
	if err != nil {
		t.endModelCall(span, nil, "", 0, err)
		if mctx.Err() != nil {
			return nil, nil, mctx.Err()
		}
		t.r.meter.ModelCall(cmp.Or(t.req.Model, t.r.cfg.Provider.Name()), true, meter.Tokens{})
		return nil, nil, shown(fmt.Errorf("model provider: %w", err))
	}
	name := resp.Model
	if name == "" {
		name = t.req.Model
	}
	cost, _ := t.r.cfg.Prices.Cost(name, resp.Usage)
	t.endModelCall(span, resp, name, cost, nil)
	u := t.conv.Edges.User
	thinking := t.turn.Thinking
	if resp.Thinking != "" {
		th := resp.Thinking
		if thinking != nil {
			th = *thinking + "\n\n" + th
		}
		thinking = &th
	}
	var rows []*ent.ToolCall
	// The final answer ends the turn in the step's own transaction: the
	// end's update checks the claim, so the step costs no statement more
	// than one with tool calls. A turn no longer RUNNING (cancelled
	// meanwhile) still has its model call recorded, with the claim
	// checked as for any write, and is not ended here.
	var claim func(ctx context.Context, tx *ent.Tx) (bool, error)
	// touched: the end's statement marked the conversation updated too.
	touched := false
	final := len(resp.ToolCalls) == 0
	if final {
		claim = func(ctx context.Context, tx *ent.Tx) (bool, error) {
			if t.r.cfg.Queue.Dialect() == dialect.Postgres {
				n, err := t.endTouched(ctx, tx, step, resp.Text, thinking, resp.Thinking != "")
				t.finished = err == nil && n > 0
				touched = t.finished
				return t.finished, err
			}
			u := tx.Turn.Update().
				Where(turn.ID(t.turnID), turn.ClaimedBy(t.r.id), turn.StatusEQ(turn.StatusRUNNING), unrecorded(step)).
				SetStatus(turn.StatusCOMPLETED).SetFinishedAt(t.r.cfg.Now()).SetAnswer(resp.Text).
				ClearClaimedBy().ClearHeartbeatAt()
			if resp.Thinking != "" {
				u.SetThinking(*thinking)
			}
			t.recordAgent(u)
			n, err := u.Save(ctx)
			t.finished = err == nil && n > 0
			return t.finished, err
		}
	}
	// One step is recorded once: a run that lost its claim, or a second
	// runner, cannot record it again. The claim's update checks it.
	err = t.writeClaimed(ctx, &step, claim, func(ctx context.Context, tx *ent.Tx) error {
		err := tx.ModelCall.Create().
			SetTurnID(t.turnID).SetOrganizationID(t.conv.OrganizationID).SetAgentID(t.conv.AgentID).SetUserID(u.ID).
			SetStep(step).SetText(resp.Text).
			SetProvider(t.r.cfg.Provider.Name()).SetModel(name).
			SetInputTokens(resp.Usage.InputUncached).SetCacheReadTokens(resp.Usage.CacheRead).
			SetCacheWriteTokens(resp.Usage.CacheWrite).SetOutputTokens(resp.Usage.Output).
			SetCost(cost.USD()).SetCostMicros(cost).SetDurationMs(elapsed.Milliseconds()).SetStartedAt(start).
			SetPrefixTokens(int64(t.prefixTokens)).SetAttribution(t.req.Attribution.Key()).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("record model call: %w", err)
		}
		if resp.Thinking != "" && !t.finished {
			if err := tx.Turn.Update().Where(turn.ID(t.turnID)).SetThinking(*thinking).Exec(ctx); err != nil {
				return fmt.Errorf("record thinking: %w", err)
			}
		}
		if t.finished && !touched {
			return t.touch(ctx, tx.Client())
		}
		if final {
			return nil
		}
		creates := make([]*ent.ToolCallCreate, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			creates[i] = tx.ToolCall.Create().
				SetTurnID(t.turnID).SetPosition(t.nextPosition + i).SetStep(step).
				SetCallID(c.ID).SetName(c.Name).SetArguments(string(c.Arguments)).
				SetStartedAt(t.r.cfg.Now())
		}
		rows, err = tx.ToolCall.CreateBulk(creates...).Save(ctx)
		if err != nil {
			return fmt.Errorf("record tool calls: %w", err)
		}
		return nil
	})
	if err != nil {
		t.finished = false
		return nil, nil, err
	}
	if t.finished {
		t.unrecordedAgent = nil // the end's update recorded it
	}
	t.r.meter.ModelCall(name, false, meter.Tokens{Input: resp.Usage.InputUncached, CacheRead: resp.Usage.CacheRead,
		CacheWrite: resp.Usage.CacheWrite, Output: resp.Usage.Output})
	t.turn.Thinking = thinking
	t.nextPosition += len(resp.ToolCalls)
	stream.End()
	t.publish(events.Event{Kind: events.ModelCallFinished, Step: step, Status: string(turn.StatusRUNNING)})
	if t.finished {
		t.ended(turn.StatusCOMPLETED, true)
	}
	return resp, rows, nil
}

// errStepRecorded refuses to record a step twice.
var errStepRecorded = errors.New("already recorded")

// write runs one of the turn's writes in a transaction, on a context of its
// own with retries on a busy database (persist), and only while this
// runner holds the turn: the claim is checked, and the heartbeat renewed,
// in the same transaction, so a runner that lost the turn writes nothing.
func (t *turnRun) write(ctx context.Context, fn func(ctx context.Context, tx *ent.Tx) error) error {
	return t.writeClaimed(ctx, nil, nil, fn)
}

// checkedByWrite is the claim of a write whose own statement checks the
// claim (holds): no statement more.
func checkedByWrite(context.Context, *ent.Tx) (bool, error) { return true, nil }

// holds is the claim check of a tool call's record, in its update: the
// turn is this runner's, and on PostgreSQL its row is locked until the
// commit, as an update of it would lock it, so a runner taking the turn
// meanwhile waits for the record and then finds its heartbeat fresh.
// SQLite's one writer needs no lock.
func (t *turnRun) holds() predicate.ToolCall {
	return func(s *sql.Selector) {
		tt := sql.Table(turn.Table)
		sub := sql.Dialect(s.Dialect()).Select(tt.C(turn.FieldID)).From(tt).
			Where(sql.And(sql.EQ(tt.C(turn.FieldID), t.turnID), sql.EQ(tt.C(turn.FieldClaimedBy), t.r.id)))
		if s.Dialect() == dialect.Postgres {
			sub.ForUpdate()
		}
		s.Where(sql.Exists(sub))
	}
}

// unrecorded holds while the turn has not recorded the step: a claim's
// update that records a step checks it in the same statement.
// The subquery is correlated, by the turn's id (model_calls' turn_id
// index): ent's HasModelCallsWith is an uncorrelated IN over every model
// call of the step's number, which grows with all the turns ever run.
func unrecorded(step int) predicate.Turn {
	return func(s *sql.Selector) {
		mt := sql.Table(modelcall.Table)
		s.Where(sql.NotExists(sql.Select(mt.C(modelcall.FieldTurnID)).From(mt).Where(sql.And(
			sql.ColumnsEQ(mt.C(modelcall.FieldTurnID), s.C(turn.FieldID)),
			sql.EQ(mt.C(modelcall.FieldKind), modelcall.KindSTEP.String()),
			sql.EQ(mt.C(modelcall.FieldStep), step)))))
	}
}

// writeClaimed is write whose claim check may be an update the write makes
// anyway: claim, when set, runs first in the transaction and reports
// whether it checked the claim (it changed a row only while this runner
// holds the turn); when it did not, the claim is checked as write does.
// With step, the write records that step, and the claim's check also
// holds only while it is unrecorded (errStepRecorded otherwise).
func (t *turnRun) writeClaimed(ctx context.Context, step *int, claim func(ctx context.Context, tx *ent.Tx) (bool, error),
	fn func(ctx context.Context, tx *ent.Tx) error) error {
	return persist(ctx, func(ctx context.Context) error {
		tx, err := t.client().Tx(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func() { _ = tx.Rollback() }()
		checked, agent := false, false
		if claim != nil {
			if checked, err = claim(ctx, tx); err != nil {
				return fmt.Errorf("check claim: %w", err)
			}
		}
		if !checked {
			u := tx.Turn.Update().Where(turn.ID(t.turnID), turn.ClaimedBy(t.r.id))
			if step != nil {
				u.Where(unrecorded(*step))
			}
			agent = t.recordAgent(u)
			n, err := u.SetHeartbeatAt(t.r.cfg.Now()).Save(ctx)
			if err != nil {
				return fmt.Errorf("check claim: %w", err)
			}
			if n == 0 && step != nil {
				done, err := tx.ModelCall.Query().Where(modelcall.TurnID(t.turnID), modelcall.KindEQ(modelcall.KindSTEP), modelcall.Step(*step)).Exist(ctx)
				if err != nil {
					return fmt.Errorf("check step: %w", err)
				}
				if done {
					return fmt.Errorf("step %d: %w", *step, errStepRecorded)
				}
			}
			if n == 0 {
				return errLeaseLost
			}
		}
		if err := fn(ctx, tx); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if agent {
			t.unrecordedAgent = nil
		}
		return nil
	})
}

// finish ends the turn, on a context of its own: a cancelled turn must
// still be recorded as cancelled, and a busy database is waited for.
func (t *turnRun) finish(status turn.Status, answer *string, reason string) {
	ctx := tenancy.System(context.Background())
	var ended bool
	err := persist(ctx, func(ctx context.Context) error {
		u := t.client().Turn.Update().
			Where(turn.ID(t.turnID), turn.StatusIn(turn.StatusRUNNING, turn.StatusWAITING_FOR_CLARIFICATION),
				turn.Or(turn.ClaimedByIsNil(), turn.ClaimedBy(t.r.id))).
			SetStatus(status).SetFinishedAt(t.r.cfg.Now()).ClearClaimedBy().ClearHeartbeatAt()
		if answer != nil {
			u.SetAnswer(*answer)
		}
		if reason != "" && status != turn.StatusCOMPLETED {
			u.SetError(reason)
		}
		n, err := u.Save(ctx)
		ended = n > 0
		return err
	})
	if err != nil {
		t.log.Error("record turn end", "err", err)
		return
	}
	if !ended {
		return
	}
	if err := t.touch(ctx, t.client()); err != nil {
		t.log.Warn("touch conversation", "err", err)
	}
	t.ended(status, answer != nil)
}

// endTouched is the final answer's end of the turn on PostgreSQL, as the
// update callModel sends on SQLite (the claim held, the turn RUNNING, the
// step unrecorded; the agent recorded if it is not yet), with the
// conversation marked updated in the same statement when the turn ends:
// the turn's update feeds the conversation's. It returns whether the turn
// ended.
func (t *turnRun) endTouched(ctx context.Context, tx *ent.Tx, step int, answer string, thinking *string, thought bool) (int64, error) {
	now := t.r.cfg.Now()
	b := sql.Dialect(dialect.Postgres)
	mt := b.Table(modelcall.Table)
	end := b.Update(turn.Table).
		Set(turn.FieldStatus, turn.StatusCOMPLETED.String()).Set(turn.FieldFinishedAt, now).Set(turn.FieldAnswer, answer).
		SetNull(turn.FieldClaimedBy).SetNull(turn.FieldHeartbeatAt).
		Where(sql.And(sql.EQ(turn.FieldID, t.turnID), sql.EQ(turn.FieldClaimedBy, t.r.id),
			sql.EQ(turn.FieldStatus, turn.StatusRUNNING.String()),
			sql.NotExists(b.Select(mt.C(modelcall.FieldTurnID)).From(mt).Where(sql.And(
				sql.ColumnsEQ(mt.C(modelcall.FieldTurnID), b.Table(turn.Table).C(turn.FieldID)),
				sql.EQ(mt.C(modelcall.FieldKind), modelcall.KindSTEP.String()),
				sql.EQ(mt.C(modelcall.FieldStep), step)))))).
		Returning(turn.FieldConversationID)
	if thought {
		end.Set(turn.FieldThinking, *thinking)
	}
	if a := t.unrecordedAgent; a != nil {
		cfg, err := json.Marshal(a)
		if err != nil {
			return 0, fmt.Errorf("record the turn's agent: %w", err)
		}
		end.Set(turn.FieldAgentConfig, cfg)
	}
	ended := b.Table("ended")
	touch := b.Update(conversation.Table).Set(conversation.FieldUpdatedAt, now).
		Where(sql.In(conversation.FieldID, b.Select(ended.C(turn.FieldConversationID)).From(ended))).
		Prefix(sql.ExprFunc(func(b *sql.Builder) {
			b.WriteString(`WITH "ended" AS `).Wrap(func(b *sql.Builder) { b.Join(end) })
		}))
	query, args := touch.Query()
	if err := touch.Err(); err != nil {
		return 0, err
	}
	res, err := tx.Client().ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// touch marks the turn's conversation as updated now.
func (t *turnRun) touch(ctx context.Context, c *ent.Client) error {
	err := c.Conversation.Update().Where(conversation.ID(t.turn.ConversationID)).SetUpdatedAt(t.r.cfg.Now()).Exec(ctx)
	if err != nil {
		return fmt.Errorf("touch conversation: %w", err)
	}
	return nil
}

// ended counts and announces the end of the turn, once it is stored.
func (t *turnRun) ended(status turn.Status, answered bool) {
	t.r.meter.TurnFinished(string(status), t.r.cfg.Now().Sub(t.turn.StartedAt))
	setTurnStatus(t.span, string(status))
	if answered {
		t.publish(events.Event{Kind: events.Answer, Status: string(status)})
	}
	t.publish(events.Event{Kind: events.Status, Status: string(status)})
}

// end records how a run ended, and reports whether the turn was left
// RUNNING for another run because this runner is stopping.
func (t *turnRun) end(ctx context.Context, err error) (stopped bool) {
	switch {
	case err == nil:
	case errors.Is(err, errLeaseLost) || errors.Is(context.Cause(ctx), errLeaseLost):
		t.log.Info("turn left to the runner that holds it, or cancelled")
	case errors.Is(err, errStopped) || errors.Is(context.Cause(ctx), errStopped) || t.r.draining.Load():
		t.log.Info("turn left running for resume", "reason", "shutdown")
		return true
	case ctx.Err() != nil:
		t.finish(turn.StatusCANCELLED, nil, "cancelled")
	default:
		t.log.Error("turn failed", "err", err)
		t.finish(turn.StatusFAILED, nil, reason(err))
	}
	return false
}

// shownError is an error whose words a user may read in Turn.error: the
// model provider's answer, the step limit. Anything else (a database's
// words among them) is logged, and the user reads that the turn failed.
type shownError struct{ error }

func (e shownError) Unwrap() error { return e.error }

func shown(err error) error { return shownError{err} }

// reason is what Turn.error says of a failure.
func reason(err error) string {
	var s shownError
	if errors.As(err, &s) {
		return s.Error()
	}
	return "the turn stopped on an internal error and could not go on; the details are in the server's log"
}

// publish announces e, which names the turn's status as of now.
func (t *turnRun) publish(e events.Event) {
	e.TurnID, e.At = t.turnID, t.r.cfg.Now()
	t.r.cfg.Events.Publish(e)
}

// runTools carries out one step's recorded calls, at most Concurrency at
// a time and in the order their resources need (batch.Plan), and appends
// what the model hears. A resumed run (resumed) finishes a step a stopped
// run left: calls already recorded are heard as they were, a call left in
// flight is sent again only when that is safe (a read, or a write with its
// idempotency key), and otherwise recorded as one that may or may not have
// run. It reports whether the turn now waits for the user.
func (t *turnRun) runTools(ctx context.Context, step int, rows []*ent.ToolCall, resumed bool) (bool, error) {
	token, err := t.r.cfg.Signer.Mint(scope.Claims{
		OrganizationID: t.conv.OrganizationID, UserID: t.conv.UserID, AgentID: t.conv.AgentID,
		ConversationID: t.conv.ID, TurnID: t.turnID, Tools: names(t.offered),
	})
	if err != nil {
		return false, fmt.Errorf("mint scope token: %w", err)
	}
	// While the batch runs, the API of this process takes its token without
	// reading the turn (Runner.Vouches).
	defer t.r.vouchCalls(t.turnID, t.conv.ID, t.conv.UserID, t.userActiveAt)()
	s := dispatch.Scope{TurnID: t.turnID, ConversationID: t.conv.ID, Token: token, Offered: t.byName, Deferred: t.deferred, Apps: t.apps}
	if t.r.cfg.EncodeID != nil {
		s.ConversationRef = t.r.cfg.EncodeID(t.conv.ID)
	}
	calls := make([]model.ToolCall, len(rows))
	for i, row := range rows {
		calls[i] = model.ToolCall{ID: prompt.CallID(row), Name: row.Name, Arguments: []byte(row.Arguments)}
	}

	heard := make([]string, len(calls))
	images := make([][]model.Image, len(calls))
	failed := make([]bool, len(calls))
	sent := make([]json.RawMessage, len(calls))
	errs := make([]error, len(calls))
	defs := make([]tools.Definition, len(calls))
	var todo []int
	for i, c := range calls {
		defs[i] = t.byName[c.Name]
		if row := rows[i]; row.Outcome != schematype.OutcomePending {
			if row.Heard != nil {
				heard[i] = *row.Heard
			}
			failed[i] = !row.Outcome.Succeeded()
			continue
		}
		todo = append(todo, i)
	}
	// Calls that need a person's approval wait; the others run.
	t.notes = map[int]string{}
	todo, acts, waiting, err := t.gate(ctx, s, rows, calls, defs, todo, resumed)
	if err != nil {
		return false, err
	}
	batch.Run(batch.Plan(pick(defs, todo)), t.r.cfg.Concurrency, func(k int) {
		i := todo[k]
		ctx, span := t.startToolCall(ctx, rows[i])
		defer span.End()
		act := acts[i]
		t.publish(events.Event{Kind: events.ToolCallStarted, ToolCallID: rows[i].ID, Step: rows[i].Step, Status: string(turn.StatusRUNNING), Decided: act.decided})
		if act.declined != nil {
			heard[i], failed[i], errs[i] = t.record(ctx, rows[i], calls[i], *act.declined)
			sent[i] = act.declined.Arguments
		} else if resumed && !act.fresh && !retry.Repeatable(defs[i].Effect) {
			// It may have reached its backend before the stop: never again.
			res := dispatch.Result{Outcome: schematype.OutcomeMayHaveRun, Message: interrupted, Attempts: 1, Reached: true,
				Arguments: json.RawMessage(rows[i].Arguments)}
			heard[i], failed[i], errs[i] = t.record(ctx, rows[i], calls[i], res)
			sent[i] = res.Arguments
		} else {
			heard[i], failed[i], sent[i], images[i], errs[i] = t.runTool(ctx, s, rows[i], calls[i])
		}
		t.publish(events.Event{Kind: events.ToolCallFinished, ToolCallID: rows[i].ID, Step: rows[i].Step, Status: string(turn.StatusRUNNING), Decided: act.decided})
	})
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	if len(waiting) > 0 {
		// The calls that ran as they were recorded (a question among them
		// is stored with the pause); the calls waiting stay PENDING.
		for _, i := range todo {
			if len(sent[i]) > 0 {
				rows[i].Arguments = string(sent[i])
			}
			if !failed[i] && rows[i].Outcome == schematype.OutcomePending {
				rows[i].Outcome = schematype.OutcomeHits
			}
		}
		return true, t.pauseForApproval(ctx, rows, waiting)
	}
	// From here on every reader of the calls' arguments (the next model
	// call, the pause, a resume rebuilding this turn) reads them as repaired
	// and sent, never as the model first wrote them.
	t.repaired(calls, sent)
	seesImages := model.TakesImages(t.r.cfg.Provider, t.req.Model)
	for i, c := range calls {
		m := model.Message{Role: model.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Text: heard[i], IsError: failed[i]}
		if seesImages {
			m.Images = images[i]
		}
		t.req.Messages = append(t.req.Messages, m)
		if len(sent[i]) > 0 {
			rows[i].Arguments = string(sent[i])
		}
		if !failed[i] && rows[i].Outcome == schematype.OutcomePending {
			rows[i].Outcome = schematype.OutcomeHits
		}
		if !failed[i] {
			t.readDefinitions(c.Name, heard[i])
		}
	}
	// A question asked with calls that waited for approval was stored with
	// the approvals' pause, and answered before this run: no pause again.
	if !resumed && t.pausing(rows) >= 0 || resumed && t.unanswered(rows) {
		if err := t.pause(ctx, rows); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, ctx.Err()
}

// readDefinitions takes the tools whose whole definitions a get_tool_schema
// call showed the model off the turn's deferred list: from its next step
// on, they may be called. A resumed run reads the same from the calls it
// replays, so the list survives a restart.
func (t *turnRun) readDefinitions(name, heard string) {
	if name != tools.SchemaTool || len(t.deferred) == 0 {
		return
	}
	var got struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if json.Unmarshal([]byte(heard), &got) != nil {
		return
	}
	// A new map: the scope of the batch that just ran holds the old one.
	next := maps.Clone(t.deferred)
	for _, d := range got.Tools {
		delete(next, d.Name)
	}
	t.deferred = next
}

// pick returns the definitions at the given indexes.
func pick(defs []tools.Definition, idx []int) []tools.Definition {
	out := make([]tools.Definition, len(idx))
	for k, i := range idx {
		out[k] = defs[i]
	}
	return out
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
// hears, whether the call failed, the arguments as repaired and sent, and
// the images of a result of non-text media.
// A call cut by the end of a drain, or by the loss of the turn, is not
// recorded: whoever resumes the turn settles it.
func (t *turnRun) runTool(ctx context.Context, s dispatch.Scope, row *ent.ToolCall, c model.ToolCall) (string, bool, json.RawMessage, []model.Image, error) {
	res := t.r.cfg.Dispatcher.Do(ctx, s, dispatch.Call{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	if cause := context.Cause(ctx); errors.Is(cause, errStopped) || errors.Is(cause, errLeaseLost) {
		return "", false, nil, nil, cause
	}
	heard, failed, err := t.record(ctx, row, c, res)
	return heard, failed, res.Arguments, dispatch.Images(res), err
}

// record stores the call's result and what the model hears. Calls that
// finish while another's record is being written are recorded together
// after it, in one transaction (recorder): each as soon as the database
// is free, in a few statements for the lot.
func (t *turnRun) record(ctx context.Context, row *ent.ToolCall, c model.ToolCall, res dispatch.Result) (string, bool, error) {
	t.traceToolCall(ctx, res)
	def := t.byName[c.Name]
	if def.Grounds() == tools.EvidenceWindows {
		var err error
		if res.Evidence, err = t.windowsShown(ctx, res.Evidence); err != nil {
			return "", false, err
		}
	}
	e := &entry{row: row, def: def, res: res, done: make(chan struct{})}
	t.recs.add(ctx, t, e)
	if e.err != nil {
		return "", false, e.err
	}
	t.r.meter.ToolCall(t.r.toolLabel(c.Name), string(res.Outcome), res.Attempts, e.stored)
	failed := !res.Outcome.Succeeded()
	return e.heard, failed, nil
}

// recorder writes the records of a turn's tool calls: the first call to
// finish writes its own, and while it does, the calls finishing meanwhile
// queue theirs, which it writes next, together.
type recorder struct {
	mu      sync.Mutex
	queue   []*entry
	writing bool
}

// entry is one call's record: what it is given, and what its write gave.
type entry struct {
	row *ent.ToolCall
	def tools.Definition
	res dispatch.Result

	heard  string
	stored int64
	err    error
	done   chan struct{}
}

// add queues e and returns once it is written, writing it (and what queues
// meanwhile) unless another call is writing already.
func (rc *recorder) add(ctx context.Context, t *turnRun, e *entry) {
	rc.mu.Lock()
	rc.queue = append(rc.queue, e)
	if rc.writing {
		rc.mu.Unlock()
		<-e.done
		return
	}
	rc.writing = true
	for len(rc.queue) > 0 {
		batch := rc.queue
		rc.queue = nil
		rc.mu.Unlock()
		t.recordAll(ctx, batch)
		rc.mu.Lock()
	}
	rc.writing = false
	rc.mu.Unlock()
}

// recordAll writes the records of calls in one transaction: their results
// in one insert, then each call's update, which checks the claim (holds).
func (t *turnRun) recordAll(ctx context.Context, batch []*entry) {
	recs := make([]*callRecord, len(batch))
	err := t.writeClaimed(ctx, nil, checkedByWrite, func(ctx context.Context, tx *ent.Tx) error {
		var creates []*ent.StoredResultCreate
		for i, e := range batch {
			rec, err := t.prepare(tx, e.row, e.def, e.res)
			if err != nil {
				return err
			}
			recs[i] = rec
			creates = append(creates, rec.results...)
		}
		stored, err := tx.StoredResult.CreateBulk(creates...).Save(ctx)
		if err != nil {
			return fmt.Errorf("store results: %w", err)
		}
		for i, rec := range recs {
			sr := stored[0]
			rec.upd.SetResultID(sr.ID)
			batch[i].stored = sr.Bytes
			if len(rec.results) > 1 {
				batch[i].stored += stored[1].Bytes
			}
			stored = stored[len(rec.results):]
			n, err := rec.upd.Save(ctx)
			if err != nil {
				return fmt.Errorf("record tool call: %w", err)
			}
			if n == 0 {
				held, err := tx.Turn.Query().Where(turn.ID(t.turnID), turn.ClaimedBy(t.r.id)).Exist(ctx)
				switch {
				case err != nil:
					return fmt.Errorf("check claim: %w", err)
				case !held:
					return errLeaseLost
				}
				return fmt.Errorf("tool call %d: %w", batch[i].row.ID, errStepRecorded)
			}
			batch[i].heard = rec.heard
		}
		return nil
	})
	for _, e := range batch {
		e.err = err
		close(e.done)
	}
}

// callRecord is one call's record as written: the results it stores (the
// result, then its arguments when later turns replay them cut), and its
// update, whose result id the insert gives.
type callRecord struct {
	results []*ent.StoredResultCreate
	upd     *ent.ToolCallUpdate
	heard   string
}

// prepare builds a call's record in tx: the result stored under a new
// ref, what the model hears of it, and the evidence it gives.
func (t *turnRun) prepare(tx *ent.Tx, row *ent.ToolCall, def tools.Definition, res dispatch.Result) (*callRecord, error) {
	var visible []schematype.Span
	// Update, not UpdateOne: ent would read the row back after writing it.
	upd := tx.ToolCall.Update().Where(toolcall.ID(row.ID), toolcall.OutcomeEQ(schematype.OutcomePending), t.holds()).
		SetArguments(string(res.Arguments)).SetOutcome(res.Outcome).SetAttempts(res.Attempts).
		SetFailures(nonNilFailures(res.Failures)).SetRepairs(nonNilRepairs(res.Repairs)).SetFinishedAt(t.r.cfg.Now())
	// Every outcome is stored under a ref, so read_tool_result and the
	// transcript can reopen any call: a result whole, and for a refusal,
	// an error, an outage or a call that may have run, what the model was
	// told of it.
	ref, err := newRef()
	if err != nil {
		return nil, err
	}
	toStore := res
	if !res.Outcome.Succeeded() {
		told, err := dispatch.Render(res, def, ref, false)
		if err != nil {
			return nil, err
		}
		toStore = dispatch.Result{Kind: schematype.KindText, Content: []byte(told.Text)}
	}
	rec := &callRecord{upd: upd, results: []*ent.StoredResultCreate{storeResult(tx.Client(), t.conv.ID, ref, toStore)}}
	upd.SetRef(ref)
	if res.Message != "" {
		upd.SetMessage(res.Message)
	}
	// Later turns replay arguments cut (prompt.CapArguments): keep them
	// whole under a ref of their own, so the line beside the cut can name
	// where to read them.
	if _, cuts := prompt.CapArguments(string(res.Arguments)); len(cuts) > 0 {
		aref, err := newRef()
		if err != nil {
			return nil, err
		}
		args := dispatch.Result{Kind: schematype.KindJSON, Content: res.Arguments}
		rec.results = append(rec.results, storeResult(tx.Client(), t.conv.ID, aref, args))
		upd.SetArgumentsRef(aref)
	}
	h, err := dispatch.Render(res, def, ref, res.TruncatedAtSource)
	if err != nil {
		return nil, err
	}
	// Instruction-like text in what the model hears is marked where it
	// stands and recorded on the call; the backend's scope checks stay the
	// defence.
	if why := guard.Check(h.Text); why != "" {
		upd.SetGuardrail(why)
		h.Text = guard.Line(why) + "\n" + h.Text
	}
	if note := t.notes[row.ID]; note != "" {
		h.Text = note + "\n" + h.Text
	}
	// Evidence: only previews and returned windows of content count, as
	// the definition says (tools.Evidence). A window read counts the
	// windows it names of results that are evidence themselves (record
	// kept only those), never its own text; any other tool what the model
	// saw of its successful result. An acknowledgement (a write's receipt,
	// the task list, suggestions, clarify), a skill's instructions and a
	// listing count for nothing; failed reads and saved write inputs show
	// nothing.
	switch def.Grounds() {
	case tools.EvidenceWindows:
		visible = append(visible, res.Evidence...)
	case tools.EvidenceShown:
		if res.Outcome == schematype.OutcomeHits {
			for _, v := range h.Visible {
				visible = append(visible, schematype.Span{Ref: ref, Start: v.Start, End: v.End})
			}
		}
	}
	upd.SetHeard(h.Text).SetEvidence(nonNilSpans(visible))
	rec.heard = h.Text
	return rec, nil
}

// pause stores the clarification the model asked for and leaves the turn
// waiting for the user's answer. The question is read from the step's
// pausing call's arguments as repaired and sent: the ones the tool itself
// accepted.
func (t *turnRun) pause(ctx context.Context, rows []*ent.ToolCall) error {
	i := t.pausing(rows)
	if i < 0 {
		return nil
	}
	cl, err := interact.Question(rows[i])
	if err != nil {
		return fmt.Errorf("read clarification: %w", err)
	}
	var n int
	err = t.write(ctx, func(ctx context.Context, tx *ent.Tx) error {
		n, err = tx.Turn.Update().
			Where(turn.ID(t.turnID), turn.StatusEQ(turn.StatusRUNNING)).
			SetStatus(turn.StatusWAITING_FOR_CLARIFICATION).SetClarification(&cl).
			ClearClaimedBy().ClearHeartbeatAt().
			Save(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("pause for clarification: %w", err)
	}
	if n == 1 {
		setTurnStatus(t.span, string(turn.StatusWAITING_FOR_CLARIFICATION))
		t.publish(events.Event{Kind: events.Status, Step: rows[i].Step, Status: string(turn.StatusWAITING_FOR_CLARIFICATION)})
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
