package schema_test

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entschema "entgo.io/ent/dialect/sql/schema"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/migrate"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turnrating"
)

// entity is one generated entity client, reached by reflection so that an
// entity added tomorrow is checked without editing this file.
type entity struct {
	name   string
	client reflect.Value
}

func entities(c *ent.Client) []entity {
	var out []entity
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || !f.MethodByName("Query").IsValid() {
			continue
		}
		out = append(out, entity{name: v.Type().Field(i).Name, client: f})
	}
	return out
}

// call runs a method chain on the entity's client, e.g. ("Query", "All"),
// and returns the error of the last call.
func (e entity) call(ctx context.Context, build, run string) error {
	b := e.client.MethodByName(build).Call(nil)[0]
	out := b.MethodByName(run).Call([]reflect.Value{reflect.ValueOf(ctx)})
	err, _ := out[len(out)-1].Interface().(error)
	return err
}

func (e entity) count(ctx context.Context) (int, error) {
	q := e.client.MethodByName("Query").Call(nil)[0]
	out := q.MethodByName("Count").Call([]reflect.Value{reflect.ValueOf(ctx)})
	err, _ := out[1].Interface().(error)
	return int(out[0].Int()), err
}

var fromTable = regexp.MustCompile("(?i)\\bFROM [`\"]([a-z_0-9]+)[`\"]")

// TestEveryEntityDeclaresAScope walks every table of the migration schema:
// each must belong to an entity whose queries and deletes are refused
// without a viewer and limited (a WHERE clause) with one. An entity added
// without a scope mixin fails here; see Scope in scope.go.
func TestEveryEntityDeclaresAScope(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	stmts := dbtest.Count(d)
	c := d.Client()
	viewer := tenancy.WithViewer(context.Background(), &tenancy.Viewer{OrganizationID: 1, UserID: 1, Admin: true})

	tables := map[string]string{} // table → entity
	for _, e := range entities(c) {
		t.Run(e.name, func(t *testing.T) {
			err := e.call(context.Background(), "Query", "All")
			require.ErrorIs(t, err, tenancy.ErrNotFound,
				"%s is read without a viewer: give its schema a scope mixin (ent/schema/scope.go)", e.name)
			require.ErrorIs(t, e.call(context.Background(), "Delete", "Exec"), tenancy.ErrNotFound,
				"%s is deleted without a viewer: give its schema a scope mixin (ent/schema/scope.go)", e.name)

			stmts.Reset()
			require.NoError(t, e.call(tenancy.System(context.Background()), "Query", "All"))
			sys := stmts.Statements()
			require.Len(t, sys, 1)
			m := fromTable.FindStringSubmatch(sys[0])
			require.NotNil(t, m, sys[0])
			tables[m[1]] = e.name
			require.NotContains(t, sys[0], "WHERE", "the system reads every row")

			stmts.Reset()
			err = e.call(viewer, "Query", "All")
			if err != nil {
				// A system-only entity: no viewer reads it.
				require.ErrorIs(t, err, tenancy.ErrNotFound)
				require.Empty(t, stmts.Statements())
				return
			}
			got := stmts.Statements()
			require.Len(t, got, 1)
			require.Contains(t, got[0], "WHERE", "%s: a viewer's query must be limited to its rows", e.name)
		})
	}
	for _, tb := range migrate.Tables {
		if joinTable(tb) {
			continue // an M2M edge: reached only through its scoped ends
		}
		require.Contains(t, tables, tb.Name, "table %s has no entity checked here", tb.Name)
	}
}

// joinTable reports whether a table is the join table of a many-to-many
// edge: its primary key is its two foreign keys.
func joinTable(tb *entschema.Table) bool {
	if len(tb.PrimaryKey) != 2 || len(tb.ForeignKeys) != 2 {
		return false
	}
	for _, fk := range tb.ForeignKeys {
		if len(fk.Columns) != 1 || !slices.Contains(tb.PrimaryKey, fk.Columns[0]) {
			return false
		}
	}
	return true
}

// world is two organisations' rows: in A an admin (ada) and a user (bob),
// in B an admin (cy); each has a conversation with one of everything.
type world struct {
	orgA, orgB       int
	ada, bob, cy     int
	convAda, convBob int
	turnAda          int
}

func seed(t *testing.T, d *db.DB) world {
	t.Helper()
	ctx := tenancy.System(context.Background())
	c := d.Client()
	var w world
	a := c.Organization.Create().SetName("A").SaveX(ctx)
	b := c.Organization.Create().SetName("B").SaveX(ctx)
	w.orgA, w.orgB = a.ID, b.ID
	c.Setting.Create().SetKey("k").SetValue([]byte("v")).ExecX(ctx)
	c.Budget.Create().SetOrganizationID(a.ID).SetMonthlyLimitMicros(1).ExecX(ctx) // A's own limit
	users := map[string]int{}
	for i, u := range []struct {
		name  string
		org   int
		admin bool
	}{{"ada", a.ID, true}, {"bob", a.ID, false}, {"cy", b.ID, true}} {
		usr := c.User.Create().SetOrganizationID(u.org).SetName(u.name).SetAdmin(u.admin).SaveX(ctx)
		users[u.name] = usr.ID
		c.APIToken.Create().SetUserID(usr.ID).SetHash([]byte{byte(i)}).SetHint(u.name).ExecX(ctx)
		ag := c.Agent.Create().SetOrganizationID(u.org).SetName("agent " + u.name).SaveX(ctx)
		c.Application.Create().SetOrganizationID(u.org).SetName("app" + u.name).SetURL("https://x.example/mcp").ExecX(ctx)
		c.Memory.Create().SetOrganizationID(u.org).SetUserID(usr.ID).SetText("likes tea").ExecX(ctx)
		c.Skill.Create().SetOrganizationID(u.org).SetName("skill-" + u.name).SetDescription("d").SetInstructions("i").SetPublishedBy(usr.ID).ExecX(ctx)
		conv := c.Conversation.Create().SetOrganizationID(u.org).SetUserID(usr.ID).SetAgentID(ag.ID).SaveX(ctx)
		tu := c.Turn.Create().SetConversationID(conv.ID).SetNumber(1).SetUserText("hi").SaveX(ctx)
		tc := c.ToolCall.Create().SetTurnID(tu.ID).SetPosition(0).SetName("calculator").SaveX(ctx)
		c.Approval.Create().SetConversationID(conv.ID).SetTurnID(tu.ID).SetToolCallID(tc.ID).SetTool("app__t").SetArguments("{}").
			SetPolicy(schematype.ApprovalAlways).SetExpiresAt(time.Now()).ExecX(ctx)
		c.ModelCall.Create().SetTurnID(tu.ID).SetOrganizationID(u.org).SetAgentID(ag.ID).SetUserID(usr.ID).
			SetProvider("replay").SetModel("m").SetCostMicros(1).ExecX(ctx) // and its organisation's and user's MonthlySpend
		c.TurnRating.Create().SetOrganizationID(u.org).SetUserID(usr.ID).SetTurnID(tu.ID).SetAgentID(ag.ID).
			SetRating(turnrating.RatingUP).ExecX(ctx)
		c.StoredResult.Create().SetConversationID(conv.ID).SetRef("ref" + u.name).SetKind(schematype.KindText).
			SetContent([]byte("x")).SetChars(1).SetBytes(1).SetItems(1).ExecX(ctx)
		c.Task.Create().SetConversationID(conv.ID).SetPosition(0).SetTitle("t").ExecX(ctx)
		c.Budget.Create().SetOrganizationID(u.org).SetUserID(usr.ID).SetMonthlyLimitMicros(1).ExecX(ctx)
		c.Summary.Create().SetConversationID(conv.ID).SetFromTurn(1).SetToTurn(1).SetText("s").SetTurnID(tu.ID).SetModel("m").ExecX(ctx)
		c.WorkspaceFile.Create().SetConversationID(conv.ID).SetPath("a.txt").SetContent("x").SetChars(1).SetBytes(1).ExecX(ctx)
		kb := c.KnowledgeBase.Create().SetOrganizationID(u.org).SetName("kb").SaveX(ctx)
		doc := c.Document.Create().SetOrganizationID(u.org).SetKnowledgeBaseID(kb.ID).SetText("x").SaveX(ctx)
		c.DocumentChunk.Create().SetOrganizationID(u.org).SetDocumentID(doc.ID).SetSeq(0).SetPosition(0).SetText("x").ExecX(ctx)
		c.Attachment.Create().SetOrganizationID(u.org).SetConversationID(conv.ID).SetText("x").ExecX(ctx)
		art := c.Artifact.Create().SetConversationID(conv.ID).SetTitle("a").SetKind("svg").SetVersionsCount(1).SaveX(ctx)
		c.ArtifactVersion.Create().SetArtifactID(art.ID).SetConversationID(conv.ID).SetNumber(1).SetContent("<svg/>").SetChars(6).ExecX(ctx)
		c.IdempotentResponse.Create().SetOrganizationID(u.org).SetScope(fmt.Sprintf("user:%d", usr.ID)).
			SetKey("k").SetField("f").SetRequestHash("h").SetResponse([]byte("{}")).ExecX(ctx)
		switch u.name {
		case "ada":
			c.IdempotentResponse.Create().SetOrganizationID(u.org).SetScope(fmt.Sprintf("conversation:%d", conv.ID)).
				SetKey("k").SetField("f").SetRequestHash("h").SetResponse([]byte("{}")).ExecX(ctx)
			w.convAda, w.turnAda = conv.ID, tu.ID
		case "bob":
			w.convBob = conv.ID
		}
	}
	w.ada, w.bob, w.cy = users["ada"], users["bob"], users["cy"]
	return w
}

// TestScopesReachOnlyTheirRows counts what each kind of viewer reaches of
// every entity, on both databases.
func TestScopesReachOnlyTheirRows(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		w := seed(t, d)
		c := d.Client()
		// Per viewer: rows reached of each entity; an entity left out is
		// refused (not found).
		tests := []struct {
			name string
			give tenancy.Viewer
			want map[string]int
		}{
			{
				name: "admin's API token: the organisation's rows",
				give: tenancy.Viewer{OrganizationID: w.orgA, UserID: w.ada, Admin: true},
				want: map[string]int{"Organization": 1, "Memory": 1, "User": 2, "APIToken": 2, "Agent": 2, "Application": 2, "Skill": 2,
					"Conversation": 2, "Turn": 2, "Approval": 2, "ToolCall": 2, "ModelCall": 2, "TurnRating": 2, "MonthlySpend": 3, "StoredResult": 2, "Summary": 2, "Budget": 3, "Task": 2, "IdempotentResponse": 1, "WorkspaceFile": 2, "Artifact": 2, "ArtifactVersion": 2,
					"KnowledgeBase": 2, "Document": 2, "DocumentChunk": 2, "Attachment": 2},
			},
			{
				name: "user's API token: the organisation's shared rows and the user's own",
				give: tenancy.Viewer{OrganizationID: w.orgA, UserID: w.bob},
				want: map[string]int{"Organization": 1, "Memory": 1, "User": 2, "APIToken": 1, "Agent": 2, "Application": 2, "Skill": 2,
					"Conversation": 1, "Turn": 1, "Approval": 1, "ToolCall": 1, "ModelCall": 1, "TurnRating": 1, "MonthlySpend": 1, "StoredResult": 1, "Summary": 1, "Budget": 2, "Task": 1, "IdempotentResponse": 1, "WorkspaceFile": 1, "Artifact": 1, "ArtifactVersion": 1,
					"KnowledgeBase": 2, "Document": 2, "DocumentChunk": 2, "Attachment": 1},
			},
			{
				name: "admin's turn scope token: the turn's conversation and the admin's own",
				give: tenancy.Viewer{OrganizationID: w.orgA, UserID: w.ada, Admin: true, ConversationID: w.convAda, TurnID: w.turnAda},
				want: map[string]int{"Organization": 1, "Memory": 1, "User": 2, "APIToken": 1, "Agent": 2, "Application": 2, "Skill": 2,
					"Conversation": 1, "Turn": 1, "Approval": 1, "ToolCall": 1, "ModelCall": 1, "TurnRating": 1, "MonthlySpend": 1, "StoredResult": 1, "Summary": 1, "Budget": 2, "Task": 1, "IdempotentResponse": 1, "WorkspaceFile": 1, "Artifact": 1, "ArtifactVersion": 1,
					"KnowledgeBase": 2, "Document": 2, "DocumentChunk": 2, "Attachment": 1},
			},
			{
				name: "a scope token naming another user's conversation reaches nothing of it",
				give: tenancy.Viewer{OrganizationID: w.orgB, UserID: w.cy, Admin: true, ConversationID: w.convBob, TurnID: w.turnAda},
				want: map[string]int{"Organization": 1, "Memory": 1, "User": 1, "APIToken": 1, "Agent": 1, "Application": 1, "Skill": 1,
					"Conversation": 0, "Turn": 0, "Approval": 0, "ToolCall": 0, "ModelCall": 1, "TurnRating": 1, "MonthlySpend": 1, "StoredResult": 0, "Summary": 0, "Budget": 1, "Task": 0, "IdempotentResponse": 0, "WorkspaceFile": 0, "Artifact": 0, "ArtifactVersion": 0,
					"KnowledgeBase": 1, "Document": 1, "DocumentChunk": 1, "Attachment": 0},
			},
			{
				name: "the other organisation's admin",
				give: tenancy.Viewer{OrganizationID: w.orgB, UserID: w.cy, Admin: true},
				want: map[string]int{"Organization": 1, "Memory": 1, "User": 1, "APIToken": 1, "Agent": 1, "Application": 1, "Skill": 1,
					"Conversation": 1, "Turn": 1, "Approval": 1, "ToolCall": 1, "ModelCall": 1, "TurnRating": 1, "MonthlySpend": 2, "StoredResult": 1, "Summary": 1, "Budget": 1, "Task": 1, "IdempotentResponse": 1, "WorkspaceFile": 1, "Artifact": 1, "ArtifactVersion": 1,
					"KnowledgeBase": 1, "Document": 1, "DocumentChunk": 1, "Attachment": 1},
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := tenancy.WithViewer(context.Background(), &tt.give)
				got := map[string]int{}
				for _, e := range entities(c) {
					n, err := e.count(ctx)
					if err != nil {
						require.ErrorIs(t, err, tenancy.ErrNotFound, e.name)
						continue
					}
					got[e.name] = n
				}
				require.Equal(t, tt.want, got)
			})
		}
	})
}

// TestScopesLimitMutations: a viewer's updates and deletes reach only its
// rows, and it cannot create rows in another organisation.
func TestScopesLimitMutations(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		w := seed(t, d)
		c := d.Client()
		bob := tenancy.WithViewer(context.Background(), &tenancy.Viewer{OrganizationID: w.orgA, UserID: w.bob})
		sys := tenancy.System(context.Background())

		n, err := c.Conversation.Update().SetTitle("mine").Save(bob)
		require.NoError(t, err)
		require.Equal(t, 1, n, "bob's own conversation only")
		err = c.Conversation.UpdateOneID(w.convAda).SetTitle("not mine").Exec(bob)
		require.True(t, ent.IsNotFound(err), "got %v", err)
		require.Nil(t, c.Conversation.GetX(sys, w.convAda).Title)

		n, err = c.Task.Delete().Exec(bob)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 2, c.Task.Query().CountX(sys), "the others' tasks stay")

		_, err = c.Agent.Create().SetOrganizationID(w.orgB).SetName("intruder").Save(bob)
		require.ErrorIs(t, err, tenancy.ErrNotFound)
		_, err = c.Agent.Create().SetOrganizationID(w.orgA).SetName("mine").Save(bob)
		require.NoError(t, err)

		_, err = c.Setting.Create().SetKey("x").SetValue(nil).Save(bob)
		require.ErrorIs(t, err, tenancy.ErrNotFound, "settings are the system's")
	})
}

// recorder is a driver that keeps the reads sent through it.
type recorder struct {
	dialect.Driver
	reads []recorded
}

type recorded struct {
	query string
	args  []any
}

func (r *recorder) Query(ctx context.Context, query string, args, v any) error {
	a, _ := args.([]any)
	r.reads = append(r.reads, recorded{query, a})
	return r.Driver.Query(ctx, query, args, v)
}

// TestScopedReadOfOneRowIsALookup reads one row of every entity by its id,
// as each kind of viewer, and asks SQLite how it runs each read: the scope
// is checked on the row read (a lookup of its conversation, its turn, its
// user), never by listing first every row the viewer reaches, which made a
// read of one turn cost as much as the user had conversations.
func TestScopedReadOfOneRowIsALookup(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	w := seed(t, d)
	rec := &recorder{Driver: d.Driver}
	c := ent.NewClient(ent.Driver(rec))
	intType := reflect.TypeFor[int]()
	for _, v := range []tenancy.Viewer{
		{OrganizationID: w.orgA, UserID: w.bob},
		{OrganizationID: w.orgA, UserID: w.ada, Admin: true},
		{OrganizationID: w.orgA, UserID: w.ada, Admin: true, ConversationID: w.convAda, TurnID: w.turnAda},
	} {
		ctx := tenancy.WithViewer(context.Background(), &v)
		for _, e := range entities(c) {
			get := e.client.MethodByName("Get")
			if !get.IsValid() || get.Type().NumIn() != 2 || get.Type().In(1) != intType {
				continue
			}
			rec.reads = nil
			get.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(1)})
			for _, r := range rec.reads {
				rows, err := d.SQL.QueryContext(ctx, "EXPLAIN QUERY PLAN "+r.query, r.args...)
				require.NoError(t, err, r.query)
				var plan []string
				for rows.Next() {
					var id, parent, unused int
					var detail string
					require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
					plan = append(plan, detail)
				}
				require.NoError(t, rows.Err())
				require.NoError(t, rows.Close())
				for _, step := range plan {
					require.False(t, strings.HasPrefix(step, "SCAN") || strings.Contains(step, "LIST SUBQUERY"),
						"%s as %+v: %q in the plan of\n%s\n%s", e.name, v, step, r.query, strings.Join(plan, "\n"))
				}
			}
		}
	}
}
