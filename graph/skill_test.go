package graph_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
)

const publishSkill = `mutation($n: String!, $d: String!, $i: String!) {
  publishSkill(input: {name: $n, description: $d, instructions: $i}) { id name description instructions }
}`

// TestSkills: admins publish skills (again under a name: replaced); every
// member lists the organisation's; an agent binds published skills only;
// load_skill answers a bound skill whole, to a turn offered it, and refuses
// any other name alike, whether another organisation has a skill of that
// name or nobody does.
func TestSkills(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setup(t, d)
		publish := func(token, name, desc, instr string) *response {
			return b.do(t, token, publishSkill, map[string]any{"n": name, "d": desc, "i": instr})
		}
		require.Equal(t, "FORBIDDEN", publish(b.bob.Token, "notes", "Notes.", "Do it.").code(t))
		for name, in := range map[string][3]string{
			"bad name":          {"Release Notes", "d", "i"},
			"long description":  {"notes", strings.Repeat("x", 201), "i"},
			"empty instruction": {"notes", "d", "  "},
		} {
			require.Equal(t, "BAD_USER_INPUT", publish(b.alice.Token, in[0], in[1], in[2]).code(t), name)
		}
		first := get(publish(b.alice.Token, "notes", "Meeting notes.", "Old.").ok(t), "publishSkill")
		again := get(publish(b.alice.Token, "notes", "How to write meeting notes.", "List decisions first.").ok(t), "publishSkill")
		require.Equal(t, get(first, "id"), get(again, "id"), "published again under its name: replaced")
		publish(b.alice.Token, "audit", "Checking figures.", "Check each figure twice.").ok(t)
		publish(b.eve.Token, "secret", "Evil's own.", "Evil's instructions.").ok(t)

		list := get(b.do(t, b.bob.Token, `{ skills { name description } }`, nil).ok(t), "skills")
		require.Equal(t, []any{
			map[string]any{"name": "audit", "description": "Checking figures."},
			map[string]any{"name": "notes", "description": "How to write meeting notes."},
		}, list)

		create := func(skills []string) *response {
			return b.do(t, b.bob.Token, `mutation($s: [String!]) { createAgent(input: {name: "Scribe", skills: $s}) { id skills } }`,
				map[string]any{"s": skills})
		}
		r := create([]string{"notes", "secret"})
		require.Equal(t, "BAD_USER_INPUT", r.code(t), "another organisation's skill is not published here")
		require.Contains(t, r.Errors[0].Message, `"secret" is not a published skill; published: audit, notes`)
		agent := get(create([]string{"notes", "notes"}).ok(t), "createAgent")
		require.Equal(t, []any{"notes"}, get(agent, "skills"))

		cat := get(b.do(t, b.bob.Token, catalogueQuery, map[string]any{"a": get(agent, "id")}).ok(t), "catalogue")
		generic := get(b.do(t, b.bob.Token, catalogueQuery, nil).ok(t), "catalogue")
		row := func(c any) map[string]any {
			for _, tl := range get(c, "tools").([]any) {
				if get(tl, "name") == "load_skill" {
					return tl.(map[string]any)
				}
			}
			t.Fatal("load_skill is not catalogued")
			return nil
		}
		require.Equal(t, "skill_bound", row(cat)["offeredWhen"])
		require.Equal(t, true, row(cat)["offered"], "bound, not listed: offered")
		require.Equal(t, false, row(generic)["offered"])
		require.Greater(t, row(cat)["definitionChars"], row(generic)["definitionChars"], "measured with the skill it names")

		conv := b.startConversation(t, b.bob.Token, get(agent, "id").(string), "notes")
		scope := b.scopeToken(t, conv, "load_skill")
		loaded := get(b.call(t, scope, "load_skill", conv, map[string]any{"name": "notes"}).ok(t), "loadSkill")
		require.Equal(t, map[string]any{"name": "notes", "instructions": "List decisions first."}, loaded)

		foreign := b.call(t, scope, "load_skill", conv, map[string]any{"name": "secret"})
		madeUp := b.call(t, scope, "load_skill", conv, map[string]any{"name": "secreu"})
		unbound := b.call(t, scope, "load_skill", conv, map[string]any{"name": "audit"})
		require.Equal(t, "BAD_USER_INPUT", foreign.code(t))
		require.Equal(t, strings.Replace(string(madeUp.Raw), "secreu", "secret", 1), string(foreign.Raw), "refused alike")
		require.Contains(t, unbound.Errors[0].Message, `no skill named "audit"; your skills: notes`, "published but not bound")

		require.Equal(t, "NOT_FOUND", b.call(t, b.scopeToken(t, conv, "calculator"), "load_skill", conv, map[string]any{"name": "notes"}).code(t),
			"a turn not offered load_skill cannot run it")
		require.Equal(t, "NOT_FOUND", b.call(t, b.eve.Token, "load_skill", conv, map[string]any{"name": "notes"}).code(t),
			"another organisation's conversation")
		viaAPI := get(b.call(t, b.bob.Token, "load_skill", conv, map[string]any{"name": "notes"}).ok(t), "loadSkill", "name")
		require.Equal(t, "notes", viaAPI, "an API token names the conversation")

		updated := b.do(t, b.bob.Token, `mutation($id: ID!) { updateAgent(input: {id: $id, skills: ["audit"]}) { agent { skills } } }`,
			map[string]any{"id": get(agent, "id")}).ok(t)
		require.Equal(t, []any{"audit"}, get(updated, "updateAgent", "agent", "skills"))
	})
}
