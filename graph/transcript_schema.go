package graph

import (
	"bytes"
	"cmp"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/graph/generated"
)

// What the transcript's hot path knows of its types' fields comes from the
// schema, derived once at start (fastSchema): a scalar or enum field that
// gqlgen binds straight to a field of the ent entity, with no resolver, no
// directive and no arguments, is read from that field's column and written
// as gqlgen's marshaller for its scalar writes it. So a field added to an
// ent schema and exposed through entgql is served with nobody touching the
// read path. The hot path writes by hand only what no column holds: the
// edges it follows (computedFields) and its connection's types; what it
// leaves to the resolvers is named in resolvedFields. gqlgen.yml's fieldName
// renames reach it through fieldnames_gen.go, which make generate writes.

// scalarKind is how a column is scanned and written.
type scalarKind uint8

const (
	kindID scalarKind = iota + 1
	kindInt
	kindBool
	kindString
	kindEnum
	kindTime
)

// fastColumn is a field served from its entity's column.
type fastColumn struct {
	name, column string
	kind         scalarKind
	// nullable: the entity holds a pointer (nil writes null); nonNull: the
	// schema forbids null, so a null or zero time leaves the read to the
	// resolvers, which answer with their error.
	nullable, nonNull bool
}

// fastField is a field the hot path writes: a column, or one it computes
// (obj the type of its object or list of objects, "" a leaf).
type fastField struct {
	col *fastColumn
	obj string
}

// fastEntity binds a GraphQL type the hot path reads to its ent entity:
// the struct gqlgen autobinds, the entity's columns, and gqlgen's resolver
// interface for the type (nil: the type has no resolvers).
type fastEntity struct {
	typ      reflect.Type
	columns  []string
	resolver reflect.Type
}

var fastEntities = map[string]fastEntity{
	"Conversation": {reflect.TypeFor[ent.Conversation](), conversation.Columns, reflect.TypeFor[generated.ConversationResolver]()},
	"User":         {reflect.TypeFor[ent.User](), user.Columns, reflect.TypeFor[generated.UserResolver]()},
	"Agent":        {reflect.TypeFor[ent.Agent](), agent.Columns, nil},
	"Turn":         {reflect.TypeFor[ent.Turn](), turn.Columns, reflect.TypeFor[generated.TurnResolver]()},
	"ModelCall":    {reflect.TypeFor[ent.ModelCall](), modelcall.Columns, reflect.TypeFor[generated.ModelCallResolver]()},
	"ToolCall":     {reflect.TypeFor[ent.ToolCall](), toolcall.Columns, reflect.TypeFor[generated.ToolCallResolver]()},
	"StoredResult": {reflect.TypeFor[ent.StoredResult](), storedresult.Columns, nil},
}

// computedFields are the fields the hot path writes by hand, per type: the
// edges it follows (a turn's conversation under the root turns only:
// collectFast refuses an edge back up to a type above it) and the values
// it computes from its rows (a turn's prompt statistics, a model call's
// cost as Money, a tool call's failures decoded), and the fields of the
// types that are its own (the turns' connection, its count, page info and
// edges; the count under the root turns only). TestTranscriptFieldsServed fails
// for a field of any of these types neither derived, computed nor named in
// resolvedFields.
var computedFields = map[string]map[string]string{
	"Conversation":   {"user": "User", "agent": "Agent", "turns": "TurnConnection"},
	"TurnConnection": {"pageInfo": "PageInfo", "edges": "TurnEdge", "totalCount": ""},
	"PageInfo":       {"hasNextPage": "", "hasPreviousPage": "", "startCursor": "", "endCursor": ""},
	"TurnEdge":       {"node": "Turn", "cursor": ""},
	"Turn":           {"promptStats": "PromptStats", "modelCalls": "ModelCall", "toolCalls": "ToolCall", "conversation": "Conversation"},
	"PromptStats":    {"prefixTokens": "", "inputTokens": "", "cacheReadTokens": "", "modelCalls": ""},
	"ModelCall":      {"costAmount": "Money"},
	"Money":          {"amount": "", "micros": "", "currency": ""},
	"ToolCall":       {"failures": "ItemFailure", "result": "StoredResult"},
	"ItemFailure":    {"item": "", "input": "", "kind": "", "message": ""},
}

// gqlSchema is the server's GraphQL schema.
var gqlSchema = sync.OnceValue(func() *ast.Schema {
	return generated.NewExecutableSchema(generated.Config{}).Schema()
})

// fastSchema is, per type the hot path writes, every field it knows.
var fastSchema = sync.OnceValue(func() map[string]map[string]fastField {
	return buildFastSchema(gqlSchema(), fastEntities, computedFields, gqlgenFieldNames)
})

// buildFastSchema derives the fields of each entity's type from schema
// (with gqlgen.yml's renames: per type, the Go field a GraphQL field is
// bound to) and adds the computed ones, __typename everywhere.
func buildFastSchema(schema *ast.Schema, entities map[string]fastEntity, computed, renames map[string]map[string]string) map[string]map[string]fastField {
	out := map[string]map[string]fastField{}
	for typ, fields := range computed {
		out[typ] = map[string]fastField{"__typename": {}}
		for name, obj := range fields {
			out[typ][name] = fastField{obj: obj}
		}
	}
	for typ, e := range entities {
		if out[typ] == nil {
			out[typ] = map[string]fastField{"__typename": {}}
		}
		for name, c := range deriveColumns(schema, typ, e, renames[typ]) {
			if _, hand := out[typ][name]; !hand {
				out[typ][name] = fastField{col: c}
			}
		}
	}
	return out
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[graphql.Marshaler]()
)

// deriveColumns finds the fields of typ in schema that gqlgen binds to a
// field of e's struct that is a column: a scalar or enum field, with no
// arguments and no directive, for which neither the type's resolver
// interface nor the struct has a method (gqlgen would call it), and whose
// Go type the hot path knows how to write as gqlgen does. renames binds a
// field to a Go name other than its own, as gqlgen.yml's fieldName does.
func deriveColumns(schema *ast.Schema, typ string, e fastEntity, renames map[string]string) map[string]*fastColumn {
	def := schema.Types[typ]
	if def == nil {
		return nil
	}
	columns := map[string]bool{}
	for _, c := range e.columns {
		columns[c] = true
	}
	out := map[string]*fastColumn{}
	for _, f := range def.Fields {
		if strings.HasPrefix(f.Name, "__") || len(f.Arguments) > 0 || len(f.Directives) > 0 || f.Type.Elem != nil {
			continue
		}
		named := schema.Types[f.Type.Name()]
		if named == nil || named.Kind != ast.Scalar && named.Kind != ast.Enum {
			continue
		}
		goName := cmp.Or(renames[f.Name], f.Name)
		if hasMethod(e.resolver, f.Name) || hasMethod(reflect.PointerTo(e.typ), goName) || hasMethod(e.typ, goName) {
			continue
		}
		sf, ok := structField(e.typ, goName)
		if !ok {
			continue
		}
		column, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !columns[column] {
			continue
		}
		gt, nullable := sf.Type, false
		if gt.Kind() == reflect.Pointer {
			gt, nullable = gt.Elem(), true
		}
		kind := scalarFor(named, gt)
		if kind == 0 {
			continue
		}
		out[f.Name] = &fastColumn{name: f.Name, column: column, kind: kind, nullable: nullable, nonNull: f.Type.NonNull}
	}
	return out
}

// scalarFor is how a value of Go type gt is written for the schema's type
// named, or 0 when the hot path cannot write it as gqlgen does.
func scalarFor(named *ast.Definition, gt reflect.Type) scalarKind {
	switch {
	case named.Kind == ast.Enum:
		if gt.Kind() == reflect.String && enumQuoted(named, gt) {
			return kindEnum
		}
	case named.Name == "ID":
		if gt.Kind() == reflect.Int && gt.PkgPath() == "" {
			return kindID
		}
	case named.Name == "Int":
		if gt == reflect.TypeFor[int]() || gt == reflect.TypeFor[int64]() || gt == reflect.TypeFor[int32]() {
			return kindInt
		}
	case named.Name == "Boolean":
		if gt == reflect.TypeFor[bool]() {
			return kindBool
		}
	case named.Name == "String":
		if gt == reflect.TypeFor[string]() {
			return kindString
		}
	case named.Name == "Time":
		if gt == timeType {
			return kindTime
		}
	}
	return 0
}

// enumQuoted reports that gt's MarshalGQL writes each of the enum's values
// quoted as strconv.Quote quotes it, as the hot path writes an enum.
func enumQuoted(def *ast.Definition, gt reflect.Type) bool {
	if !gt.Implements(marshalerType) || len(def.EnumValues) == 0 {
		return false
	}
	for _, v := range def.EnumValues {
		var buf bytes.Buffer
		reflect.ValueOf(v.Name).Convert(gt).Interface().(graphql.Marshaler).MarshalGQL(&buf)
		if buf.String() != strconv.Quote(v.Name) {
			return false
		}
	}
	return true
}

// hasMethod reports a method of t named as gqlgen names a field's (its
// name with the first letter upper-cased, matched regardless of case).
func hasMethod(t reflect.Type, field string) bool {
	if t == nil {
		return false
	}
	for i := range t.NumMethod() {
		if strings.EqualFold(t.Method(i).Name, field) {
			return true
		}
	}
	return false
}

// structField is the exported field of t gqlgen binds field to (its name,
// regardless of case).
func structField(t reflect.Type, field string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.IsExported() && !sf.Anonymous && strings.EqualFold(sf.Name, field) {
			return sf, true
		}
	}
	return reflect.StructField{}, false
}
