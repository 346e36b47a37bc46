package loop

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/offer/token"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/tools"
)

// load reads the turn and what it belongs to, and fixes its tools.
func (t *turnRun) load(ctx context.Context) error {
	l := t.loaded
	if l == nil {
		var err error
		if l, err = t.r.store.Load(ctx, t.turnID); err != nil {
			return err
		}
	}
	if l.Err != nil {
		return l.Err
	}
	t.turn, t.conv, t.limited = l.Turn, l.Conv, l.Limited
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
	rules, err := offer.LoadRules(ctx, t.r.store.Client(), t.agent, u.Edges.Organization, offer.Server{WebProvider: t.r.cfg.WebProvider,
		Embeddings: t.r.cfg.Embeddings, EmbeddingsDown: t.r.cfg.embeddingsDown(), Browser: t.r.cfg.Browser, Rates: t.r.cfg.Rates})
	if err != nil {
		return err
	}
	rules.Attachments, rules.DocumentAttachments = l.Attached, l.Readable
	deck := offer.Build(rules, t.r.cfg.Tools, appDefs)
	t.offered = deck.Offered
	t.byName = make(map[string]tools.Definition, len(t.offered))
	t.deferred = nil
	if deck.Deferred {
		t.deferred = map[string]bool{}
	}
	for _, d := range t.offered {
		t.byName[d.Name] = d
		if deck.Deferred && !offer.Keeps(d) {
			t.deferred[d.Name] = true
		}
	}
	t.req = model.Request{
		System:      prompt.System(t.agent, t.offered, deck.Deferred),
		Tools:       prompt.Specs(deck.Sent),
		MaxTokens:   t.r.cfg.MaxTokens,
		Attribution: t.attribution(),
	}
	t.prefixTokens = token.Prefix(t.req.System, deck.SentTokens)
	return nil
}

// fixAgent returns the agent as the turn first ran with it: the first run
// records its instructions, tools and switches on the turn with its first
// write (store.Turn.RecordAgent), and every later run (after a clarification, a
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
	t.db.RecordAgent(&schematype.AgentConfig{Instructions: a.Instructions, Tools: a.Tools, Memory: a.Memory,
		BudgetCheck: a.BudgetCheck, PastConversationSearch: a.PastConversationSearch, Skills: a.Skills, ToolLoading: string(a.ToolLoading),
		Approvals: a.Approvals})
	return &a
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
	rows, err := t.r.store.Applications(ctx, t.conv.OrganizationID)
	if err != nil {
		return nil, err
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

func names(defs []tools.Definition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}
