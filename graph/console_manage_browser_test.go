package graph_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/turnrating"
)

// TestConsoleManagesInBrowser drives Chromium through what an admin
// changes in the console: the turns list filtered by a person and by an
// agent; a transcript's ratings (up and down, who, why); the Agents view
// archiving and bringing back an agent, deleting one (a confirm first;
// refused, in the API's words, while conversations use it) and editing one
// (refused past the catalogue ceiling, then saved); and the Knowledge &
// skills view deleting a document, a knowledge base and a skill (refused,
// naming the agent, while one binds them).
func TestConsoleManagesInBrowser(t *testing.T) {
	t.Parallel()
	exe := browser(t)
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	b.withApps(t)
	const bulk = 30
	crm, _ := crmServer(t, bulk)
	allowed := []string{"lookup"}
	for i := range bulk {
		allowed = append(allowed, fmt.Sprintf("bulk_%d", i))
	}
	b.do(t, b.alice.Token, `mutation($u: String!, $a: [String!]!) { registerApplication(input: {name: "crm", url: $u, allowedTools: $a}) { id } }`,
		map[string]any{"u": crm, "a": allowed}).ok(t)
	s := seedConsole(t, b)
	l := seedLifecycle(t, b)
	librarian := get(b.do(t, b.alice.Token, `mutation($kb: ID!) { createAgent(input: {name: "Librarian", tools: ["knowledge_search"], knowledgeBaseIds: [$kb], skills: ["tone"]}) { id } }`,
		map[string]any{"kb": l.kb}).ok(t), "createAgent", "id").(string)

	ctx := tenancy.System(context.Background())
	first := b.client.Turn.Query().Where(turn.ConversationID(gidInt(t, s.aliceConv)), turn.Number(1)).OnlyX(ctx)
	conv := b.client.Conversation.GetX(ctx, first.ConversationID)
	for _, r := range []struct {
		user    int
		rating  turnrating.Rating
		comment string
	}{{b.alice.UserID, turnrating.RatingUP, "Spot on."}, {b.bob.UserID, turnrating.RatingDOWN, "The report was cut short."}} {
		b.client.TurnRating.Create().SetOrganizationID(conv.OrganizationID).SetUserID(r.user).SetTurnID(first.ID).
			SetAgentID(conv.AgentID).SetRating(r.rating).SetComment(r.comment).ExecX(ctx)
	}
	bobTurns := b.client.Turn.Query().Where(turn.HasConversationWith(conversation.UserID(b.bob.UserID))).CountX(ctx)
	researcherTurns := b.client.Turn.Query().Where(turn.HasConversationWith(conversation.AgentID(gidInt(t, s.researcher)))).CountX(ctx)
	require.Less(t, researcherTurns, 50, "one page")

	origin, err := url.Parse(b.srv.URL)
	require.NoError(t, err)
	p := openPage(t, exe, origin.Hostname(), 120*time.Second, chromedp.Env("TZ=UTC"), chromedp.WindowSize(1360, 900))
	bctx := p.ctx
	eval, wait, gone, click := p.eval, p.wait, p.gone, p.click
	// set changes a form field as a person does (event: "change" or
	// "input"), so Preact hears it.
	set := func(sel, v, event string) {
		t.Helper()
		eval(`(() => { const e = document.querySelector(` + quote(sel) + `); e.value = ` + quote(v) + `; e.dispatchEvent(new Event(` + quote(event) + `, {bubbles: true})); return '' })()`)
	}
	rowsWith := func(text string) (all, with int) {
		t.Helper()
		v := eval(`JSON.stringify([...document.querySelectorAll('#turns-pages tr.turn-row')].map((r) => r.textContent))`)
		rows := strings.Split(strings.Trim(v, `[]`), `","`)
		if v == "[]" {
			return 0, 0
		}
		for _, r := range rows {
			if strings.Contains(r, text) {
				with++
			}
		}
		return len(rows), with
	}
	hash := func(h string) { eval(`(location.hash = ` + quote(h) + `, '')`) }
	dir := screenshotDir(t)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}

	require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(b.srv.URL+"/admin#token="+b.alice.Token)))
	wait(`#viewer`, "Alice")

	// Turns: by a person, then by an agent.
	hash(`#/turns`)
	wait(`#turns-count`, "turns of the organisation")
	wait(`#filter-user`, "Bob")
	set(`#filter-user`, s.bob, "change")
	wait(`#turns-count`, fmt.Sprintf("%d turns of the organisation match the filters", bobTurns))
	require.Eventually(t, func() bool { all, bob := rowsWith("Bob"); return all == bobTurns && bob == all }, 30*time.Second, 100*time.Millisecond, "Bob's turns only")
	set(`#filter-user`, "", "change")
	set(`#filter-agent`, s.researcher, "change")
	wait(`#turns-count`, fmt.Sprintf("%d turns of the organisation match the filters", researcherTurns))
	require.Eventually(t, func() bool {
		all, res := rowsWith("Research assistant")
		return all == researcherTurns && res == all
	}, 30*time.Second, 100*time.Millisecond, "the researcher's turns only")

	// A transcript's ratings.
	hash(`#/conversations/` + s.aliceConv)
	wait(`#turn-1`, "Rated 1 up · 1 down")
	wait(`#turn-1 .turn-ratings`, "Spot on.")
	wait(`#turn-1 .turn-ratings`, "Bob")
	wait(`#turn-1 .turn-ratings`, "The report was cut short.")
	eval(`(document.querySelector('#turn-1 .turn-ratings').scrollIntoView({block: 'center'}), '')`)
	shot("console-transcript-ratings.png")

	// Agents: archive and bring back.
	hash(`#/agents`)
	spare := `#agent-` + l.agent
	wait(spare, "Spare agent")
	click(spare + ` button.archive`)
	wait(`#agents-message`, "“Spare agent” is archived")
	wait(spare, "archived")
	require.NotNil(t, get(b.do(t, b.alice.Token, `query($id: ID!) { node(id: $id) { ... on Agent { archivedAt } } }`, map[string]any{"id": l.agent}).ok(t), "node", "archivedAt"))
	click(spare + ` button.unarchive`)
	wait(`#agents-message`, "“Spare agent” is in use again")
	require.Nil(t, get(b.do(t, b.alice.Token, `query($id: ID!) { node(id: $id) { ... on Agent { archivedAt } } }`, map[string]any{"id": l.agent}).ok(t), "node", "archivedAt"))

	// Delete: refused while conversations use it, in the API's words.
	researcher := `#agent-` + s.researcher
	click(researcher + ` button.delete`)
	wait(`#confirm-agent-`+s.researcher, "cannot be undone")
	click(`#confirm-agent-` + s.researcher + ` .confirm-yes`)
	wait(`#agents-message`, "has 1 conversation: archive it instead")
	wait(researcher, "Research assistant")
	// Cancelled, nothing happens; confirmed, it is gone.
	click(spare + ` button.delete`)
	click(`#confirm-agent-` + l.agent + ` .confirm-no`)
	gone(`#confirm-agent-` + l.agent)
	wait(spare, "Spare agent")
	click(spare + ` button.delete`)
	click(`#confirm-agent-` + l.agent + ` .confirm-yes`)
	wait(`#agents-message`, "“Spare agent” is deleted")
	gone(spare)
	require.Equal(t, "NOT_FOUND", b.do(t, b.alice.Token, `mutation($id: ID!) { deleteAgent(id: $id) }`, map[string]any{"id": l.agent}).code(t))

	// Edit: past the widest ceiling is refused with the figures, then a
	// change that fits is saved.
	seller := `#agent-` + s.seller
	click(seller + ` button.edit`)
	wait(`#agent-form`, "Edit “Sales helper”")
	tools := make([]string, len(allowed))
	for i, a := range allowed {
		tools[i] = "crm__" + a
	}
	set(`#agent-tools`, strings.Join(tools, ", "), "input")
	click(`#agent-save`)
	wait(`#agents-message`, "over the widest ceiling of 40122")
	shot("console-agents-edit.png")
	set(`#agent-name`, "Sales desk", "input")
	set(`#agent-tools`, "update_tasks, calculator", "input")
	click(`#agent-budget`)
	click(`#agent-save`)
	wait(`#agents-message`, "“Sales desk” is saved")
	gone(`#agent-form`)
	wait(seller, "budget check")
	got := get(b.do(t, b.alice.Token, `query($id: ID!) { node(id: $id) { ... on Agent { name tools budgetCheck } } }`, map[string]any{"id": s.seller}).ok(t), "node")
	require.Equal(t, map[string]any{"name": "Sales desk", "tools": []any{"update_tasks", "calculator"}, "budgetCheck": true}, got)

	// Knowledge & skills: what an agent binds is refused, naming it.
	hash(`#/knowledge`)
	kb := `#kb-` + l.kb
	wait(kb, "Handbook")
	wait(`#doc-`+l.doc, "Policy")
	click(kb + ` .family-head button.delete`)
	click(`#confirm-kb-` + l.kb + ` .confirm-yes`)
	wait(`#knowledge-message`, "bound to")
	wait(`#knowledge-message`, "Librarian")
	shot("console-knowledge-refused.png")
	click(`#skill-` + l.skill + ` button.delete`)
	click(`#confirm-skill-` + l.skill + ` .confirm-yes`)
	wait(`#knowledge-message`, "Librarian")
	wait(`#knowledge-message`, "take it out of their skills first")
	click(`#doc-` + l.doc + ` button.delete`)
	click(`#confirm-doc-` + l.doc + ` .confirm-yes`)
	wait(`#knowledge-message`, "The document “Policy” is deleted.")
	gone(`#doc-` + l.doc)
	// Unbound, both go.
	b.do(t, b.alice.Token, `mutation($id: ID!) { updateAgent(input: {id: $id, knowledgeBaseIds: [], skills: []}) { agent { id } } }`, map[string]any{"id": librarian}).ok(t)
	click(`#skill-` + l.skill + ` button.delete`)
	click(`#confirm-skill-` + l.skill + ` .confirm-yes`)
	wait(`#knowledge-message`, "The skill “tone” is deleted.")
	gone(`#skill-` + l.skill)
	click(kb + ` .family-head button.delete`)
	click(`#confirm-kb-` + l.kb + ` .confirm-yes`)
	wait(`#knowledge-message`, "The knowledge base “Handbook” is deleted, with 0 documents.")
	gone(kb)
	require.Empty(t, get(b.do(t, b.alice.Token, `{ knowledgeBases { edges { node { id } } } skills { id } }`, nil).ok(t), "skills"))
}
