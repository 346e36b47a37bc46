package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/console"
	"github.com/toolgate/toolgate/graph/generated"
	"github.com/toolgate/toolgate/graph/gid"
)

// TestFastTurnsMatchesResolvers reads the root turns field through the
// hot path and through the resolvers alone, and wants the same bytes: the
// console's RecentTurns page after page, filtered by status, by a range of
// start times and by person, backward, in every order, counted without a
// page, as a member, as another organisation and with a scope token,
// refusals, random selections, and turns whose conversation's agent is out
// of reach.
func TestFastTurnsMatchesResolvers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		w := newBothWays(t, d)
		b, slow, counter, same := w.b, w.slow, w.counter, w.same

		ctx := tenancy.System(context.Background())
		agentID := b.createAgent(t, b.alice.Token, "Helper")
		conv := b.startConversation(t, b.alice.Token, agentID, "odd \"quoted\"\ttitle\x01 ✓")
		convID, err := gid.Decode(conv)
		require.NoError(t, err)
		seedTranscript(t, b.client, convID, 7, 3)
		seedOddTurns(t, b, convID)
		bobsAgent := b.createAgent(t, b.alice.Token, "Seller")
		bobs := b.startConversation(t, b.bob.Token, bobsAgent, "bob's")
		seedTranscript(t, b.client, gidInt(t, bobs), 4, 2)
		eves := b.startConversation(t, b.eve.Token, b.createAgent(t, b.eve.Token, "Evil"), "evil")
		seedTranscript(t, b.client, gidInt(t, eves), 3, 1)
		// Start times with ties (the order's later fields and the id
		// decide between them) and with nanoseconds the database keeps or
		// rounds, as the cursors must hold them.
		base := time.Date(2026, 5, 6, 7, 8, 9, 123_456_789, time.UTC)
		for i, tu := range b.client.Turn.Query().Order(turn.ByID()).AllX(ctx) {
			query, args := entsql.Dialect(d.Driver.Dialect()).Update(turn.Table).
				Set(turn.FieldStartedAt, base.Add(time.Duration(i%4)*time.Hour)).Where(entsql.EQ(turn.FieldID, tu.ID)).Query()
			require.NoError(t, d.Driver.Exec(ctx, query, args, nil))
		}

		op := console.Operations()["turns"]
		// walk reads every page of query forward (after) and backward
		// (before, with last), and returns the cursors it saw.
		walk := func(t *testing.T, token, query string, vars map[string]any, hot bool) []any {
			var cursors []any
			var after any
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20)
				v := map[string]any{"first": 4, "after": after}
				for k, x := range vars {
					v[k] = x
				}
				data := same(t, hot, token, query, v).ok(t)
				info := get(data, "turns", "pageInfo").(map[string]any)
				cursors = append(cursors, info["endCursor"])
				if info["hasNextPage"] == false {
					return cursors
				}
				after = info["endCursor"]
			}
		}

		statuses := map[string]any{"status": "COMPLETED"}
		started := map[string]any{"startedAtGTE": base.Add(time.Hour).Format(time.RFC3339Nano), "startedAtLT": base.Add(3 * time.Hour).Format(time.RFC3339)}
		byBob := byWho(gidOf(t, b, "User", b.bob.UserID), "")
		t.Run("the console's pages", func(t *testing.T) {
			for _, where := range []any{nil, statuses, started, byBob, map[string]any{}, map[string]any{"statusIn": "FAILED"},
				map[string]any{"or": []any{statuses, map[string]any{"numberGT": 3, "replayed": true}}}} {
				walk(t, b.alice.Token, op, map[string]any{"where": where}, true)
			}
			data := same(t, true, b.alice.Token, op, nil).ok(t)
			require.Len(t, get(data, "turns", "edges"), 9+4)
			require.EqualValues(t, 9+4, get(data, "turns", "totalCount"))
			data = same(t, true, b.alice.Token, op, map[string]any{"where": byBob}).ok(t)
			require.Len(t, get(data, "turns", "edges"), 4)
			// The statements carry each entity's scope, as ent's would.
			counter.Reset()
			b.do(t, b.alice.Token, op, map[string]any{"where": statuses}).ok(t)
			require.Len(t, counter.Statements(), 5, counter.Statements())
			for _, s := range counter.Statements()[1:] {
				require.Contains(t, s, "organization_id", s)
			}
		})
		orders := []string{``, `orderBy: null`, `orderBy: []`, `orderBy: [{field: NUMBER}]`, `orderBy: [{field: NUMBER, direction: DESC}]`,
			`orderBy: [{field: STARTED_AT}]`, `orderBy: [{field: STARTED_AT, direction: DESC}]`,
			`orderBy: [{field: NUMBER, direction: ASC}, {field: STARTED_AT, direction: DESC}]`,
			`orderBy: [{field: STARTED_AT, direction: ASC}, {field: NUMBER, direction: DESC}]`}
		t.Run("every order, forward and backward", func(t *testing.T) {
			for _, order := range orders {
				forward := `query($first: Int, $after: Cursor, $where: TurnWhereInput) { turns(first: $first, after: $after, where: $where, ` + order + `) {
				  totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { id number startedAt } } } }`
				cursors := walk(t, b.alice.Token, forward, nil, true)
				backward := `query($last: Int, $before: Cursor) { turns(last: $last, before: $before, ` + order + `) {
				  totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { id number } } } }`
				for _, c := range cursors {
					same(t, true, b.alice.Token, backward, map[string]any{"last": 3, "before": c})
				}
				same(t, true, b.alice.Token, backward, map[string]any{"last": 5})
				same(t, true, b.alice.Token, backward, map[string]any{"last": 100})
			}
		})
		t.Run("counts without a page", func(t *testing.T) {
			for _, q := range []string{
				`{ turns { totalCount } }`,
				`{ turns(where: {status: FAILED}) { totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`,
				`{ turns(last: 2) { pageInfo { hasNextPage hasPreviousPage endCursor } } }`,
				`{ turns(where: {userText: "nobody asked"}) { totalCount pageInfo { hasNextPage } edges { cursor } } }`,
				`{ turns(first: 3) { __typename } }`,
			} {
				same(t, true, b.alice.Token, q, nil)
			}
		})
		t.Run("viewers", func(t *testing.T) {
			data := same(t, true, b.bob.Token, op, nil).ok(t)
			require.Len(t, get(data, "turns", "edges"), 4, "a member reads their own conversations' turns")
			walk(t, b.bob.Token, op, nil, true)
			walk(t, b.bob.Token, op, map[string]any{"where": byBob}, true)
			data = same(t, true, b.eve.Token, op, nil).ok(t)
			require.Len(t, get(data, "turns", "edges"), 3, "another organisation's")
			same(t, true, b.eve.Token, op, map[string]any{"where": byBob})
			same(t, false, b.scopeToken(t, conv, "calculator"), op, nil)
		})
		t.Run("refusals and shapes left to the resolvers", func(t *testing.T) {
			other := get(same(t, true, b.alice.Token, `{ turns(first: 2, orderBy: [{field: NUMBER}]) { pageInfo { endCursor } } }`, nil).ok(t),
				"turns", "pageInfo", "endCursor")
			for _, c := range []struct {
				q    string
				vars map[string]any
			}{
				{op, map[string]any{"first": 0}},
				{op, map[string]any{"first": 1000}},
				{op, map[string]any{"after": "not a cursor"}},
				{op, map[string]any{"after": other}}, // a cursor of another order
				{`{ turns(first: 2, last: 2) { edges { node { id } } } }`, nil},
				{`{ turns(last: 0) { totalCount } }`, nil},
				{`{ turns(first: 3, orderBy: [{field: NUMBER}, {field: NUMBER, direction: DESC}]) { edges { cursor node { id } } } }`, nil},
				{`{ turns(first: 3, where: {not: {}}) { edges { node { id } } } }`, nil},
				{`{ turns(first: 3) { edges { node { id conversation { id turns(first: 1) { edges { node { id } } } } } } } }`, nil},
				{`{ turns(first: 3) { edges { node { id ratings { id } } } } }`, nil},
				{`{ turns(first: 3, where: {hasConversationWith: [{hasUserWith: [{id: "not an id"}]}]}) { totalCount edges { node { id } } } }`, nil},
			} {
				same(t, false, b.alice.Token, c.q, c.vars)
			}
		})
		t.Run("generated selections", func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rnd := rand.New(rand.NewPCG(seed, 34))
			schema := generated.NewExecutableSchema(generated.Config{}).Schema()
			var cursors []string
			for _, order := range orders {
				q := `{ turns(first: 100, ` + order + `) { edges { cursor } } }`
				for _, e := range get(slow.do(t, b.alice.Token, q, nil).ok(t), "turns", "edges").([]any) {
					cursors = append(cursors, get(e, "cursor").(string))
				}
			}
			for range 60 {
				served := rnd.IntN(4) > 0
				q, vars := drawTurnsQuery(rnd, schema, cursors, served)
				token := b.alice.Token
				if rnd.IntN(4) == 0 {
					token = b.bob.Token
				}
				if served {
					takes, err := graph.HotPathTakes(q, vars)
					require.NoError(t, err, q)
					require.True(t, takes, "the hot path leaves %s (%v)", q, vars)
				}
				same(t, false, token, q, vars)
			}
		})
		// Last, as it leaves a row no other read expects: a conversation
		// whose agent is another organisation's, out of the viewer's reach
		// though the conversation and its turns are not. The resolvers
		// answer for its turns; the hot path leaves the read to them.
		t.Run("a conversation's agent out of reach", func(t *testing.T) {
			query, args := entsql.Dialect(d.Driver.Dialect()).Update(conversation.Table).
				Set(conversation.FieldAgentID, gidInt(t, b.createAgent(t, b.eve.Token, "Elsewhere"))).
				Where(entsql.EQ(conversation.FieldID, gidInt(t, bobs))).Query()
			require.NoError(t, d.Driver.Exec(ctx, query, args, nil))
			// The resolvers report the turns' errors in the order they
			// resolve them: the same data, byte for byte, and the same
			// errors, in any order.
			split := func(raw []byte) (string, []string) {
				var r struct {
					Data   json.RawMessage
					Errors []json.RawMessage
				}
				require.NoError(t, json.Unmarshal(raw, &r))
				errs := make([]string, len(r.Errors))
				for i, e := range r.Errors {
					errs[i] = string(e)
				}
				slices.Sort(errs)
				return string(r.Data), errs
			}
			for _, token := range []string{b.alice.Token, b.bob.Token} {
				for _, q := range []string{op, `{ turns(first: 20) { edges { node { id conversation { id agent { name } } } } } }`} {
					fastData, fastErrors := split(b.do(t, token, q, nil).Raw)
					wantData, wantErrors := split(slow.do(t, token, q, nil).Raw)
					require.Equal(t, wantData, fastData)
					require.Equal(t, wantErrors, fastErrors)
					require.NotEmpty(t, fastErrors)
				}
				// Without the agent, the hot path serves it.
				same(t, true, token, `{ turns(first: 20) { edges { node { id conversation { id user { name } } } } } }`, nil)
			}
		})
	})
}

// drawTurnsQuery draws a read of the root turns field: a random selection
// of Turn (its conversation, user and agent among it), with or without
// totalCount, page info and cursors, paged forward or backward, from a
// cursor of any order or none, in a random order of the schema's fields
// and directions, filtered or not, with arguments written or passed as
// variables. served draws only fields and arguments the hot path takes
// (but for a cursor of another order, which ent refuses and so does it,
// by leaving it to the resolvers).
func drawTurnsQuery(rnd *rand.Rand, schema *ast.Schema, cursors []string, served bool) (string, map[string]any) {
	d := &drawer{rnd: rnd, schema: schema, served: served, root: true}
	vars := map[string]any{}
	var decl, args []string
	arg := func(name, typ string, v any, literal string) {
		if rnd.IntN(2) == 0 {
			vars[name] = v
			decl = append(decl, "$"+name+": "+typ)
			args = append(args, name+": $"+name)
			return
		}
		args = append(args, name+": "+literal)
	}
	n := 1 + rnd.IntN(12)
	backward := rnd.IntN(2) == 0
	switch {
	case backward:
		arg("last", "Int", n, fmt.Sprint(n))
	case rnd.IntN(5) > 0:
		arg("first", "Int", n, fmt.Sprint(n))
	}
	if rnd.IntN(2) == 0 {
		c := cursors[rnd.IntN(len(cursors))]
		if backward {
			arg("before", "Cursor", c, `"`+c+`"`)
		} else {
			arg("after", "Cursor", c, `"`+c+`"`)
		}
	}
	if terms := rnd.IntN(3); terms > 0 || rnd.IntN(4) == 0 {
		fields := []string{"NUMBER", "STARTED_AT"}
		rnd.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
		var list []map[string]any
		var lits []string
		for _, f := range fields[:terms] {
			o, lit := map[string]any{"field": f}, "field: "+f
			if dir := []string{"", "ASC", "DESC"}[rnd.IntN(3)]; dir != "" {
				o["direction"], lit = dir, lit+", direction: "+dir
			}
			list, lits = append(list, o), append(lits, "{"+lit+"}")
		}
		arg("orderBy", "[TurnOrder!]", list, "["+strings.Join(lits, ", ")+"]")
	}
	wheres := []struct {
		v   map[string]any
		lit string
	}{
		{map[string]any{"status": "COMPLETED"}, `{status: COMPLETED}`},
		{map[string]any{"statusIn": []string{"FAILED", "RUNNING"}}, `{statusIn: [FAILED, RUNNING]}`},
		{map[string]any{"numberGTE": 3, "userTextContains": "question"}, `{numberGTE: 3, userTextContains: "question"}`},
		{map[string]any{"not": map[string]any{"replayed": true}}, `{not: {replayed: true}}`},
	}
	if rnd.IntN(2) == 0 {
		w := wheres[rnd.IntN(len(wheres))]
		arg("where", "TurnWhereInput", w.v, w.lit)
	}
	var conn []string
	if rnd.IntN(8) > 0 {
		node := d.selection("Turn", 1)
		if node == "" {
			node = "id"
		}
		conn = append(conn, "edges { "+map[bool]string{true: "cursor ", false: ""}[rnd.IntN(2) == 0]+"node { "+node+" } }")
	}
	if rnd.IntN(2) == 0 {
		conn = append(conn, "pageInfo { hasNextPage hasPreviousPage startCursor endCursor }")
	}
	if rnd.IntN(2) == 0 || len(conn) == 0 {
		conn = append(conn, "totalCount")
	}
	rnd.Shuffle(len(conn), func(i, j int) { conn[i], conn[j] = conn[j], conn[i] })
	q := "query"
	if len(decl) > 0 {
		q += "(" + strings.Join(decl, ", ") + ")"
	}
	turns := "turns"
	if len(args) > 0 {
		turns += "(" + strings.Join(args, ", ") + ")"
	}
	q += " { " + turns + " { " + strings.Join(conn, " ") + " } } " + strings.Join(d.fragments, " ")
	return q, vars
}
