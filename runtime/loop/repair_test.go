package loop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/attachment"
	entdocument "github.com/toolgate/toolgate/ent/document"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/repair"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/registry"
)

// routed is a model provider that answers each conversation by a marker in
// its turn's message: the first model call of the turn makes the marked
// call, any later one answers in words. Turns of many cases can then run
// at once under one runner.
type routed struct {
	mu       sync.Mutex
	calls    map[string]model.ToolCall
	requests map[string][]model.Request
}

func (p *routed) Name() string { return "routed" }

func (p *routed) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	var user string
	last := req.Messages[len(req.Messages)-1]
	for _, m := range req.Messages {
		if m.Role == model.RoleUser {
			user = m.Text
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for marker, c := range p.calls {
		if !strings.HasSuffix(user, marker) {
			continue
		}
		p.requests[marker] = append(p.requests[marker], req)
		if last.Role == model.RoleUser {
			return &model.Response{ToolCalls: []model.ToolCall{c}, Model: "gpt-4.1"}, nil
		}
		return &model.Response{Text: "Done.", Model: "gpt-4.1"}, nil
	}
	return &model.Response{Text: "No case.", Model: "gpt-4.1"}, nil
}

// canonical holds, for every built-in tool, arguments that fit its schema
// as sent. REF stands for a ref of the case's conversation, ARTIFACT for
// an artifact of it holding "<p>one</p>" (inspected for print_pdf, which
// refuses a draft), PAGE for a
// page the web tools can read (the organisation enabled them), DOCUMENT
// for a document of the knowledge base the agent binds; every case starts
// with a file a.md holding "one\n" and an attachment.
var canonical = map[string]string{
	"clarify":                   `{"question": "Go on?", "options": ["Yes"]}`,
	"suggest_next_actions":      `{"suggestions": ["Show me more"]}`,
	"calculator":                `{"expression": "2/3"}`,
	"read_tool_result":          `{"refs": ["REF"]}`,
	"read_transcript":           `{}`,
	"list_files":                `{}`,
	"search_files":              `{"strings": ["one"]}`,
	"read_file":                 `{"path": "a.md"}`,
	"write_file":                `{"files": [{"path": "b.md", "content": "two"}]}`,
	"edit_file":                 `{"path": "a.md", "edits": [{"old": "one", "new": "uno"}]}`,
	"delete_file":               `{"path": "a.md"}`,
	"search_tools":              `{"queries": ["files"]}`,
	"list_tools":                `{}`,
	"get_tool_schema":           `{"names": ["calculator"]}`,
	"update_tasks":              `{"tasks": [{"title": "Budget", "status": "pending"}]}`,
	"budget_check":              `{}`,
	"research_web":              `{"queries": ["tides"], "maxPages": 1}`,
	"read_page":                 `{"url": "PAGE"}`,
	"run_code":                  `{"code": "console.log(toolResults.length)", "toolResults": ["REF"]}`,
	"create_artifact":           `{"title": "Deck", "kind": "html", "content": "<p>one</p>"}`,
	"rewrite_artifact":          `{"artifactId": "ARTIFACT", "content": "<p>two</p>"}`,
	"update_artifact":           `{"artifactId": "ARTIFACT", "edits": [{"old": "one", "new": "uno"}]}`,
	"inspect_artifact":          `{"artifactId": "ARTIFACT", "pages": [1]}`,
	"measure_layout":            `{"artifactId": "ARTIFACT", "selectors": ["p"]}`,
	"print_pdf":                 `{"artifactId": "ARTIFACT", "path": "deck.pdf"}`,
	"knowledge_search":          `{"queries": ["tides"]}`,
	"read_document":             `{"documentId": "DOCUMENT"}`,
	"search_attachments":        `{"queries": ["tides"]}`,
	"load_skill":                `{"name": "notes"}`,
	"search_past_conversations": `{"queries": ["tides"]}`,
	"memory_write":              `{"facts": [{"text": "FACT"}]}`,
	"memory_search":             `{"queries": ["tides"]}`,
	"memory_forget":             `{"ids": ["MEMORY"]}`,
}

// broken is a call's arguments in a shape a repair rule mends.
type broken struct {
	rule repair.Rule
	path string
	args string
}

// breakings derives, from arguments that fit, every shape a repair rule
// reads back to them: the whole object as JSON text, empty arguments for
// an empty object, and for each list of one item the list as JSON text, the
// item alone, and (for an object item) its fields flattened into the call.
func breakings(t *testing.T, args string) []broken {
	t.Helper()
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(args), &obj))
	text, err := json.Marshal(args)
	require.NoError(t, err)
	out := []broken{{rule: repair.RuleArgumentsFromText, args: string(text)}}
	if len(obj) == 0 {
		out = append(out, broken{rule: repair.RuleEmptyArguments, args: `null`})
	}
	with := func(key string, v any) string {
		o := maps.Clone(obj)
		o[key] = v
		b, err := json.Marshal(o)
		require.NoError(t, err)
		return string(b)
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		list, ok := obj[key].([]any)
		if !ok || len(list) != 1 {
			continue
		}
		b, err := json.Marshal(list)
		require.NoError(t, err)
		out = append(out, broken{rule: repair.RuleListFromText, path: key, args: with(key, string(b))},
			broken{rule: repair.RuleListFromElement, path: key, args: with(key, list[0])})
		if item, ok := list[0].(map[string]any); ok {
			o := maps.Clone(obj)
			delete(o, key)
			maps.Copy(o, item)
			b, err := json.Marshal(o)
			require.NoError(t, err)
			out = append(out, broken{rule: repair.RuleFoldIntoList, path: key, args: string(b)})
		}
	}
	return out
}

// TestRepairedArgumentsReachEveryConsumer sends every built-in tool its
// arguments in every shape a repair rule mends, through a real turn. Each
// call must run as if sent right: the tool, the record, the model's next
// call and, for clarify, the pause all read the repaired arguments. (A
// clarify whose options came as one string used to be repaired, run, and
// then fail the turn when the pause re-read what the model wrote.)
func TestRepairedArgumentsReachEveryConsumer(t *testing.T) {
	t.Parallel()
	defs := registry.All()
	// A tool added to the registry without an example here fails at once.
	for _, d := range defs {
		require.Contains(t, canonical, d.Name, "give %s arguments that fit, so every repair rule is tried on it", d.Name)
	}
	rules := map[repair.Rule]bool{}
	type tcase struct {
		def    tools.Definition
		broken broken
	}
	var cases []tcase
	for _, d := range defs {
		for _, b := range breakings(t, canonical[d.Name]) {
			rules[b.rule] = true
			cases = append(cases, tcase{def: d, broken: b})
		}
	}
	for _, r := range []repair.Rule{repair.RuleListFromText, repair.RuleListFromElement, repair.RuleFoldIntoList,
		repair.RuleEmptyArguments, repair.RuleArgumentsFromText} {
		require.True(t, rules[r], "no tool tried with %s", r)
	}
	var optional []string
	for _, d := range defs {
		if !d.AlwaysOn() {
			optional = append(optional, d.Name)
		}
	}

	each(t, func(t *testing.T, d *db.DB) {
		p := &routed{calls: map[string]model.ToolCall{}, requests: map[string][]model.Request{}}
		h := newHarness(t, d, p)
		sys := tenancy.System(context.Background())
		h.client.Organization.Update().SetWebResearch(true).ExecX(sys)
		org := h.client.Organization.Query().FirstX(sys)
		kb := h.client.KnowledgeBase.Create().SetOrganizationID(org.ID).SetName("Handbook").SaveX(sys)
		doc := h.client.Document.Create().SetOrganizationID(org.ID).SetKnowledgeBaseID(kb.ID).SetTitle("Tides").
			SetText("Tides rise and fall twice a day.").SetStatus(entdocument.StatusREADY).SaveX(sys)
		h.gql(t, `mutation { publishSkill(input: {name: "notes", description: "Notes.", instructions: "Decisions first."}) { id } }`, nil)
		for i, tc := range cases {
			name := fmt.Sprintf("%s/%s/%s", tc.def.Name, tc.broken.rule, tc.broken.path)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if tc.def.Offered == tools.OfferArtifactReview && reviewBrowser() == nil {
					t.Skip("no headless browser: the review tools are not offered")
				}
				// Every switch on: the switched tools are offered too.
				conv := h.agent(t, map[string]any{"tools": optional, "budgetCheck": true, "pastConversationSearch": true, "memory": true, "knowledgeBaseIds": []string{gid.Encode(kb.ID)}, "skills": []string{"notes"}})
				convID, err := gid.Decode(conv)
				require.NoError(t, err)
				h.client.Attachment.Create().SetOrganizationID(org.ID).SetConversationID(convID).SetFilename("notes.txt").
					SetText("Notes.").SetStatus(attachment.StatusREADY).ExecX(sys)
				h.gql(t, `mutation($c: ID) { writeFiles(conversationId: $c, files: [{path: "a.md", content: "one\n"}]) { files { path } } }`,
					map[string]any{"c": conv})
				want := strings.NewReplacer("PAGE", h.page, "DOCUMENT", gid.Encode(doc.ID)).Replace(canonical[tc.def.Name])
				args := strings.NewReplacer("PAGE", h.page, "DOCUMENT", gid.Encode(doc.ID)).Replace(tc.broken.args)
				if strings.Contains(want, "REF") {
					ref := h.storedRef(t, p, conv, fmt.Sprintf("setup %d", i))
					want = strings.ReplaceAll(want, "REF", ref)
					args = strings.ReplaceAll(args, "REF", ref)
				}
				if strings.Contains(want, "ARTIFACT") {
					a := h.gql(t, `mutation($c: ID) { createArtifact(conversationId: $c, title: "Deck", kind: "html", content: "<p>one</p>") { artifactId } }`,
						map[string]any{"c": conv})
					id := a["createArtifact"].(map[string]any)["artifactId"].(string)
					if tc.def.Name == "print_pdf" {
						h.gql(t, `mutation($c: ID, $a: ID!) { inspectArtifact(conversationId: $c, artifactId: $a) { version } }`,
							map[string]any{"c": conv, "a": id})
					}
					want = strings.ReplaceAll(want, "ARTIFACT", id)
					args = strings.ReplaceAll(args, "ARTIFACT", id)
				}
				if strings.Contains(want, "FACT") {
					fact := fmt.Sprintf("Prefers tide table number %d.", i)
					want = strings.ReplaceAll(want, "FACT", fact)
					args = strings.ReplaceAll(args, "FACT", fact)
				}
				if strings.Contains(want, "MEMORY") {
					m := h.gql(t, `mutation($c: ID, $f: String!) { memoryWrite(conversationId: $c, facts: [{text: $f}]) { stored { id } } }`,
						map[string]any{"c": conv, "f": fmt.Sprintf("Forgettable fact number %d.", i)})
					id := m["memoryWrite"].(map[string]any)["stored"].([]any)[0].(map[string]any)["id"].(string)
					want = strings.ReplaceAll(want, "MEMORY", id)
					args = strings.ReplaceAll(args, "MEMORY", id)
				}
				marker := fmt.Sprintf("case %d", i)
				p.mu.Lock()
				p.calls[marker] = call("c1", tc.def.Name, args)
				p.mu.Unlock()
				id := h.send(t, conv, marker, "")
				got := h.wait(t, id)

				calls := h.calls(t, id)
				require.Len(t, calls, 1)
				c := calls[0]
				require.Contains(t, []schematype.Outcome{schematype.OutcomeHits, schematype.OutcomeAbsence}, c.Outcome, "%s: %v", args, c.Heard)
				require.JSONEq(t, want, c.Arguments, "recorded as repaired and sent")
				require.NotEmpty(t, c.Repairs)
				require.Equal(t, tc.broken.rule.String(), c.Repairs[0].Rule)

				if tc.def.Name == "clarify" {
					require.Equal(t, turn.StatusWAITING_FOR_CLARIFICATION, got.Status, got.Error)
					require.Equal(t, []string{"Yes"}, got.Clarification.Options)
					require.Equal(t, "Go on?", got.Clarification.Question)
					return
				}
				require.Equal(t, turn.StatusCOMPLETED, got.Status, got.Error)
				// The model's next call reads the call as sent.
				p.mu.Lock()
				reqs := p.requests[marker]
				p.mu.Unlock()
				require.Len(t, reqs, 2)
				var asked []model.ToolCall
				for _, m := range reqs[1].Messages {
					if m.Role == model.RoleAssistant && len(m.ToolCalls) > 0 {
						asked = m.ToolCalls
					}
				}
				require.Len(t, asked, 1)
				require.JSONEq(t, want, string(asked[0].Arguments))
			})
		}
	})
}

// storedRef runs a calculator call in the conversation and returns its ref.
func (h *harness) storedRef(t *testing.T, p *routed, conv, marker string) string {
	t.Helper()
	p.mu.Lock()
	p.calls[marker] = call("s1", "calculator", `{"expression": "1+1"}`)
	p.mu.Unlock()
	id := h.send(t, conv, marker, "")
	require.Equal(t, turn.StatusCOMPLETED, h.wait(t, id).Status)
	calls := h.calls(t, id)
	require.Len(t, calls, 1)
	require.NotNil(t, calls[0].Ref)
	return *calls[0].Ref
}
