package graph

import (
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/generated"
)

// TestTranscriptFieldsServed walks the schema's types the hot path writes
// and fails for a field it neither writes nor names in resolvedFields, the
// one list of what falls back to the resolvers: a field added to these
// types must be served, or named there. The types include every one the
// hot path's edges reach from its root fields (the conversation's and the
// root turns' connection), so a field of a turn under the root turns is
// held to the same as one under a transcript.
func TestTranscriptFieldsServed(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	types := slices.Clone(transcriptTypes)
	for typ := range computedFields {
		if !slices.Contains(types, typ) {
			types = append(types, typ)
		}
	}
	for typ := range fastEntities {
		if !slices.Contains(types, typ) {
			types = append(types, typ)
		}
	}
	for _, root := range []string{"Conversation", "TurnConnection"} {
		require.Equal(t, root, schema.Query.Fields.ForName(map[string]string{"Conversation": "conversation", "TurnConnection": "turns"}[root]).Type.Name())
		reached := map[string]bool{}
		var reach func(typ string)
		reach = func(typ string) {
			if reached[typ] {
				return
			}
			reached[typ] = true
			require.Contains(t, types, typ, "the hot path reaches %s from %s without its fields being checked", typ, root)
			for _, f := range fastSchema()[typ] {
				if f.obj != "" {
					reach(f.obj)
				}
			}
		}
		reach(root)
		require.True(t, reached["Turn"], "%s reaches the turns", root)
	}
	for _, typ := range types {
		def := schema.Types[typ]
		if def == nil {
			t.Fatalf("no type %s in the schema", typ)
		}
		for _, f := range def.Fields {
			if _, fast := fastSchema()[typ][f.Name]; fast {
				continue
			}
			if !slices.Contains(resolvedFields[typ], f.Name) {
				t.Errorf("%s.%s falls back to the resolvers without being named in resolvedFields", typ, f.Name)
			}
		}
	}
	for typ, names := range resolvedFields {
		for _, name := range names {
			if schema.Types[typ].Fields.ForName(name) == nil {
				t.Errorf("resolvedFields names %s.%s, which the schema has not", typ, name)
			}
			if _, fast := fastSchema()[typ][name]; fast {
				t.Errorf("resolvedFields names %s.%s, which the hot path writes", typ, name)
			}
		}
	}
}

// TestTranscriptColumnsDerived proves the hot path's knowledge of columns
// comes from the schema: every scalar of the transcript's entities that is
// not computed is a column derived from the GraphQL schema and the ent
// entity, no list of the hot path names one, and a field added to a schema
// and an entity is derived with nothing else changed, while one with a
// resolver, a directive or a type the hot path cannot write as gqlgen does
// is not.
func TestTranscriptColumnsDerived(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	derived := 0
	for typ, e := range fastEntities {
		cols := deriveColumns(schema, typ, e, gqlgenFieldNames[typ])
		for name := range computedFields[typ] {
			require.NotContains(t, cols, name, "%s.%s is a column: computedFields should not name it", typ, name)
		}
		for _, f := range schema.Types[typ].Fields {
			named := schema.Types[f.Type.Name()]
			if named.Kind != ast.Scalar && named.Kind != ast.Enum || slices.Contains(resolvedFields[typ], f.Name) {
				continue
			}
			if _, computed := computedFields[typ][f.Name]; computed {
				continue
			}
			require.Contains(t, cols, f.Name, "%s.%s", typ, f.Name)
			require.Equal(t, cols[f.Name], fastSchema()[typ][f.Name].col)
			derived++
		}
	}
	// The transcript's own: the conversation's 6, the turn's 11, the model
	// call's 12, the tool call's 12, the result's 9, and the user's and
	// agent's.
	require.Greater(t, derived, 50)
	require.Equal(t, &fastColumn{name: "userText", column: turn.FieldUserText, kind: kindString, nonNull: true}, fastSchema()["Turn"]["userText"].col)
	require.Equal(t, &fastColumn{name: "finishedAt", column: turn.FieldFinishedAt, kind: kindTime, nullable: true}, fastSchema()["Turn"]["finishedAt"].col)
	require.Equal(t, kindEnum, fastSchema()["Turn"]["status"].col.kind)
	require.Equal(t, kindID, fastSchema()["Turn"]["id"].col.kind)

	// A schema and an entity with fields added, and nothing else.
	added := gqlparser.MustLoadSchema(&ast.Source{Input: `
		scalar Time
		directive @admin on FIELD_DEFINITION
		enum Mood { HAPPY SAD }
		type Query { note: Note }
		type Note {
			id: ID!
			body: String!
			heading: String
			stars: Int!
			seen: Boolean!
			writtenAt: Time
			mood: Mood!
			loudMood: Mood!
			secret: String @admin
			tags: [String!]!
			summary: String!
			shout(loud: Boolean): String!
			notAColumn: String
			headline: String!
		}`})
	type note struct {
		ID         int        `json:"id,omitempty"`
		Body       string     `json:"body,omitempty"`
		Heading    *string    `json:"heading,omitempty"`
		Stars      int        `json:"stars,omitempty"`
		Seen       bool       `json:"seen,omitempty"`
		WrittenAt  *timeAlias `json:"written_at,omitempty"`
		Mood       mood       `json:"mood,omitempty"`
		LoudMood   loudMood   `json:"loud_mood,omitempty"`
		Secret     *string    `json:"secret,omitempty"`
		Tags       []string   `json:"tags,omitempty"`
		Summary    string     `json:"summary,omitempty"`
		Shout      string     `json:"shout,omitempty"`
		NotAColumn string     `json:"-"`
		Headline   string     `json:"headline,omitempty"`
	}
	type noteResolver interface {
		Summary() (string, error)
	}
	cols := deriveColumns(added, "Note", fastEntity{
		typ:      reflect.TypeFor[note](),
		columns:  []string{"id", "body", "heading", "stars", "seen", "written_at", "mood", "loud_mood", "secret", "tags", "summary", "shout", "headline"},
		resolver: reflect.TypeFor[noteResolver](),
	}, map[string]string{"headline": "Body"})
	require.Equal(t, map[string]*fastColumn{
		"id":      {name: "id", column: "id", kind: kindID, nonNull: true},
		"body":    {name: "body", column: "body", kind: kindString, nonNull: true},
		"heading": {name: "heading", column: "heading", kind: kindString, nullable: true},
		"stars":   {name: "stars", column: "stars", kind: kindInt, nonNull: true},
		"seen":    {name: "seen", column: "seen", kind: kindBool, nonNull: true},
		"mood":    {name: "mood", column: "mood", kind: kindEnum, nonNull: true},
		// gqlgen.yml's fieldName binds headline to Body, as gqlgen does,
		// not to the struct's own Headline.
		"headline": {name: "headline", column: "body", kind: kindString, nonNull: true},
	}, cols, "writtenAt is not a time.Time, loudMood's MarshalGQL writes another text, secret has a directive, "+
		"tags is a list, summary has a resolver, shout arguments, notAColumn no column")
}

// timeAlias is a type named like a time, which the hot path must not
// write as one.
type timeAlias struct{}

type mood string

func (m mood) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(m))) }

type loudMood string

func (m loudMood) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(strings.ToLower(string(m))))
}

// TestTurnOrderFieldsKnown holds turnOrderColumns to the schema's
// TurnOrderField (a value it does not know leaves the read to the
// resolvers) and to ent's columns: each value orders by the column of the
// entity's field of the same name.
func TestTurnOrderFieldsKnown(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	var names []string
	for _, v := range schema.Types["TurnOrderField"].EnumValues {
		names = append(names, v.Name)
		column, ok := turnOrderColumns[v.Name]
		require.True(t, ok, "TurnOrderField %s has no column in turnOrderColumns", v.Name)
		require.Contains(t, turn.Columns, column)
		var f ent.TurnOrderField
		require.NoError(t, f.UnmarshalGQL(v.Name))
		require.Equal(t, v.Name, f.String())
		require.Equal(t, strings.ReplaceAll(strings.ToLower(v.Name), "_", ""), strings.ReplaceAll(column, "_", ""))
	}
	require.Len(t, turnOrderColumns, len(names))
	// The root's default, queryResolver.Turns's.
	require.Equal(t, []orderTerm{{column: turn.FieldStartedAt, desc: true}}, defaultTurnOrder)
}
