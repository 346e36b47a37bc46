package graph

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
)

// The root turns field through the transcript's hot path. The admin
// console reads the turns a caller may read, newest first, with each
// turn's tool calls and its conversation's title, user and agent
// (console/ops/turns.graphql); resolved, each of its some thirty fields a
// turn costs gqlgen's executor a context and a marshaller, several times
// what the same turn costs in a transcript. fastTurns answers it with the
// transcript's columns, rows and writers: the page of turns in ent's
// pager's order (any list of the schema's TurnOrder fields, STARTED_AT
// descending when none is given, as queryResolver.Turns orders), filtered
// by the where argument's own predicate (ent's TurnWhereInput.P), its
// count, the page's tool calls and its conversations with their users and
// agents, one statement each and read side by side, every table limited by
// its entity's policy (scoped). Cursors and page info are the pager's, byte
// for byte (TestFastTurnsMatchesResolvers).
//
// Anything it cannot be sure of leaves the field to the resolvers, which
// then answer or refuse as before: a selection collectFast refuses, first
// or last 0, both, a cursor or where the resolvers would refuse, an order
// naming a field twice or one it does not know, and a turn of the page
// whose conversation, user or agent is out of reach (ent's eager load then
// finds no edge for it, which the resolvers answer as they do).

// turnOrderColumns are the columns of the schema's TurnOrderField values
// (TestTurnOrderFieldsKnown fails for a value missing here).
var turnOrderColumns = map[string]string{"NUMBER": turn.FieldNumber, "STARTED_AT": turn.FieldStartedAt}

// defaultTurnOrder is queryResolver.Turns's order when orderBy is not
// given: the newest first.
var defaultTurnOrder = []orderTerm{{column: turn.FieldStartedAt, desc: true}}

// fastTurns answers the root turns field f, or leaves it to next.
func fastTurns(ctx context.Context, drv dialect.Driver, oc *graphql.OperationContext, f graphql.CollectedField, next graphql.RootResolver) graphql.Marshaler {
	sel, ok := collectFast(oc, f, "TurnConnection")
	if !ok {
		return next(ctx)
	}
	p, ok := rootTurnsPage(f.ArgumentMap(oc.Variables))
	if !ok {
		return next(ctx)
	}
	t := fastReads.Get().(*fastRead)
	t.drv, t.size, t.root = drv, 4<<10, true
	if ok, err := t.loadRoot(ctx, p, sel); err != nil || !ok {
		t.release()
		return next(ctx)
	}
	return graphql.WriterFunc(func(w io.Writer) {
		t.answer = t.connection(slices.Grow(t.answer[:0], t.size), sel)
		_, _ = w.Write(t.answer)
		t.release()
	})
}

// rootTurnsPage reads the root turns field's arguments as
// queryResolver.Turns reads them (first DefaultPage when neither first nor
// last is given), or reports false for any the hot path leaves to the
// resolvers.
func rootTurnsPage(args map[string]any) (p page, ok bool) {
	var hasFirst, hasLast bool
	for k, v := range args {
		if v == nil {
			continue
		}
		switch k {
		case "first", "last":
			if p.limit, ok = pageCount(v); !ok {
				return page{}, false
			}
			hasFirst, hasLast = hasFirst || k == "first", hasLast || k == "last"
		case "after":
			if p.after, ok = pageCursor(v); !ok {
				return page{}, false
			}
		case "before":
			if p.before, ok = pageCursor(v); !ok {
				return page{}, false
			}
		case "orderBy":
			if p.order, ok = turnOrder(v); !ok {
				return page{}, false
			}
		case "where":
			w, ok := turnWhere(v)
			if !ok {
				return page{}, false
			}
			if w != nil {
				p.where = []func(*entsql.Selector){w}
			}
		default:
			return page{}, false
		}
	}
	if hasFirst && hasLast {
		return page{}, false
	}
	if !hasFirst && !hasLast {
		p.limit = DefaultPage
	}
	p.last = hasLast
	if len(p.order) == 0 {
		p.order = defaultTurnOrder
	}
	return p, true
}

// turnOrder reads an orderBy list, or reports false for a field it does
// not know or one named twice (ent's pager would order by both).
func turnOrder(v any) ([]orderTerm, bool) {
	list, isList := v.([]any)
	if !isList {
		return nil, false
	}
	var out []orderTerm
	for _, item := range list {
		o, isMap := item.(map[string]any)
		if !isMap {
			return nil, false
		}
		name, _ := o["field"].(string)
		column, known := turnOrderColumns[name]
		if !known || slices.ContainsFunc(out, func(t orderTerm) bool { return t.column == column }) {
			return nil, false
		}
		term := orderTerm{column: column}
		switch o["direction"] {
		case nil, "ASC":
		case "DESC":
			term.desc = true
		default:
			return nil, false
		}
		out = append(out, term)
	}
	return out, true
}

// turnWhere is the where argument's predicate, as gqlgen would unmarshal
// the input and ent's TurnWhereInput.P make it: nil for an empty one, and
// false for one the hot path cannot be sure to read as gqlgen does, or
// whose P fails (the resolvers then give their error). The input's ids are
// decoded as gqlgen decodes an ID; the rest reaches ent's input as JSON,
// any field the input has not failing it.
func turnWhere(v any) (func(*entsql.Selector), bool) {
	schema := gqlSchema()
	decoded, err := decodeInput(schema, ast.NamedType("TurnWhereInput", nil), v)
	if err != nil {
		return nil, false
	}
	raw, err := json.Marshal(decoded)
	if err != nil {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var w ent.TurnWhereInput
	if err := dec.Decode(&w); err != nil {
		return nil, false
	}
	pred, err := w.P()
	switch {
	case err == ent.ErrEmptyTurnWhereInput: // as Filter compares it: an empty input nested in another is an error
		return nil, true
	case err != nil:
		return nil, false
	}
	return pred, true
}

// errNotInput fails an input value the hot path does not read as gqlgen
// does.
var errNotInput = errors.New("not an input the hot path reads")

// decodeInput is v, a value of input type typ, with each ID decoded as
// gqlgen decodes one (gid.UnmarshalID) and a single value where a list is
// expected made a list of one, as GraphQL coerces it.
func decodeInput(schema *ast.Schema, typ *ast.Type, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if typ.Elem != nil {
		// A variable's list is coerced to a slice of its items' type
		// ([]string for a list of enums), a literal's to []any.
		list := reflect.ValueOf(v)
		if list.Kind() != reflect.Slice {
			list = reflect.ValueOf([]any{v})
		}
		out := make([]any, list.Len())
		for i := range out {
			var err error
			if out[i], err = decodeInput(schema, typ.Elem, list.Index(i).Interface()); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	def := schema.Types[typ.NamedType]
	switch {
	case def == nil:
		return nil, errNotInput
	case def.Kind == ast.InputObject:
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, errNotInput
		}
		out := make(map[string]any, len(m))
		for k, fv := range m {
			fd := def.Fields.ForName(k)
			if fd == nil {
				return nil, errNotInput
			}
			var err error
			if out[k], err = decodeInput(schema, fd.Type, fv); err != nil {
				return nil, err
			}
		}
		return out, nil
	case def.Name == "ID":
		return gid.UnmarshalID(v)
	case def.Kind == ast.Scalar || def.Kind == ast.Enum:
		return v, nil
	}
	return nil, errNotInput
}

// loadRoot reads what sel, the root turns field's selection, asks of page
// p: the page (with its tool calls and conversations) when it selects
// edges, and the count when it selects totalCount, or pageInfo without
// edges (which ent's pager answers from the count); false (with no error)
// leaves the field to the resolvers.
func (t *fastRead) loadRoot(ctx context.Context, p page, sel []selField) (bool, error) {
	t.order = p.order
	edges := find(sel, "edges")
	var node []selField
	if edges != nil {
		if n := find(edges.kids, "node"); n != nil {
			node = n.kids
		}
	}
	// Each read beside the others: the count, the tool calls and the
	// conversations select the page themselves (a subquery), so none
	// waits for the turns.
	var reads []chan error
	async := func(read func() error) {
		done := make(chan error, 1)
		reads = append(reads, done)
		go func() { done <- read() }()
	}
	wait := func() error {
		var err error
		for _, done := range reads {
			err = cmp.Or(err, <-done)
		}
		reads = nil
		return err
	}
	defer func() { _ = wait() }() // every return waits for the reads writing into t
	counted := find(sel, "totalCount") != nil || edges == nil && find(sel, "pageInfo") != nil
	if counted {
		async(func() error { return t.countTurns(ctx, p) })
	}
	var toolsSize int
	conv := find(node, "conversation")
	if edges != nil {
		if tc := find(node, "toolCalls"); tc != nil {
			async(func() (err error) {
				toolsSize, err = t.loadToolCalls(ctx, p, tc.kids)
				return err
			})
		}
		if conv != nil {
			async(func() error {
				b := t.builder()
				tt := b.Table(turn.Table)
				ids, err := turnsPage(ctx, b.Select(tt.C(turn.FieldConversationID)).From(tt), tt, p)
				if err != nil {
					return err
				}
				return t.loadConversations(ctx, func(s *entsql.Selector) *entsql.Predicate {
					return entsql.In(s.C(conversation.FieldID), ids)
				}, conv.kids)
			})
		}
		if err := t.loadTurns(ctx, p, node); err != nil {
			return false, cmp.Or(err, wait())
		}
	}
	if err := wait(); err != nil {
		return false, err
	}
	t.size += toolsSize
	if edges == nil {
		// ent's pager answers a page it does not read from the count.
		t.hasNext = !p.last && t.total > 0
		t.hasPrev = p.last && t.total > 0
		return true, nil
	}
	if t.total == 0 {
		t.total = len(t.turns) // as ent's pager counts a page it counted none of
	}
	if conv != nil {
		for i, c := range t.convs {
			if !c.user || !c.agent {
				return false, nil // out of reach: the resolvers answer for it
			}
			t.convAt[c.id] = i
		}
		for i := range t.turns {
			if _, ok := t.convAt[t.turns[i].convID]; !ok {
				return false, nil
			}
		}
		t.size += 256 * len(t.turns)
	}
	if err := t.loadPageModelCalls(ctx, node); err != nil {
		return false, err
	}
	return true, nil
}

// countTurns counts the turns p.where selects that the viewer may read,
// every page's, as ent's pager counts them.
func (t *fastRead) countTurns(ctx context.Context, p page) error {
	b := t.builder()
	tt := b.Table(turn.Table)
	s := b.Select(entsql.Count("*")).From(tt)
	for _, w := range p.where {
		w(s)
	}
	s, err := scoped(ctx, turn.Policy, s)
	if err != nil {
		return err
	}
	query, args := s.Query()
	var rows entsql.Rows
	if err := t.drv.Query(ctx, query, args, &rows); err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	t.total, err = entsql.ScanInt(rows)
	return err
}
