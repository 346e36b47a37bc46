package graph

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"entgo.io/contrib/entgql"
	entgo "entgo.io/ent"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/graph/gid"
)

// The transcript's hot path. A portal reads a conversation whole, a page
// of 100 turns with their model calls, tool calls and results' metadata:
// some 15,000 fields. Resolved field by field, gqlgen gives each its own
// context and marshaller, and that, not SQL, was most of the read's CPU
// and allocation. fastRootFields answers such a read itself: it loads
// the conversation with its user and agent, then each level, in one
// statement each, every table limited by its entity's own privacy policy
// as ent limits its queries (scoped), sent through ent's driver, reading
// only the columns asked for into plain rows; it writes the JSON straight
// into one pooled buffer with the same encodings gqlgen uses, so the
// answer is the one the resolvers give, byte for byte
// (TestFastTranscriptMatchesResolvers).
//
// It takes a `conversation` field when every field selected under it is
// one it writes (fastSchema: every column of the transcript's entities the
// schema exposes, derived from the schema at start, and the edges and
// computed values it writes by hand; what it leaves to the resolvers is
// named in resolvedFields, and TestTranscriptFieldsServed fails for a field
// of its types on neither list) and the turns page forward (first/after)
// or backward (last/before) by number, either direction, the schema's
// default being NUMBER ASC. Anything else (first or last 0, STARTED_AT,
// where, totalCount, turns selected twice, a turn's conversation), and any
// error, leaves the field to the resolvers, which then answer or refuse
// exactly as before. The root turns field is read with the same columns,
// rows and writers (turns_fast.go).

// selField is a field of the selection, with its sub-selection: a column
// (col, written from cell slot of its row) or a field the hot path
// computes.
type selField struct {
	alias, name string
	// key is the alias as the answer's key: quoted, then the colon.
	key  string
	kids []selField
	args map[string]any
	col  *fastColumn
	slot int
}

// implementors are the type conditions each type satisfies.
var implementors = map[string][]string{
	"Conversation": {"Conversation", "Node"}, "User": {"User", "Node"}, "Agent": {"Agent", "Node"},
	"Turn": {"Turn", "Node"}, "ToolCall": {"ToolCall", "Node"}, "StoredResult": {"StoredResult", "Node"},
}

// collectFast collects the selection of a field of type typ, or reports
// false when it selects anything the hot path does not write (fastSchema).
// An object field may be selected once only (under one alias), and never
// one leading back to a type above it (a turn's conversation under the
// conversation's turns, that conversation's turns under the root's turns):
// each of the graph's cycles is a read of its own, the resolvers'.
func collectFast(oc *graphql.OperationContext, f graphql.CollectedField, typ string) ([]selField, bool) {
	return collectBelow(oc, f, typ, nil)
}

// collectBelow is collectFast under the types above, those of the fields
// the selection is nested in.
func collectBelow(oc *graphql.OperationContext, f graphql.CollectedField, typ string, above []string) ([]selField, bool) {
	above = append(above[:len(above):len(above)], typ)
	known := fastSchema()[typ]
	sat := implementors[typ]
	if sat == nil {
		sat = []string{typ}
	}
	var out []selField
	objects := map[string]bool{}
	for _, c := range graphql.CollectFields(oc, f.Selections, sat) {
		ff, ok := known[c.Name]
		if !ok || len(c.Directives) > 0 && hasCustomDirective(c) {
			return nil, false
		}
		sf := selField{alias: c.Alias, name: c.Name, key: string(append(appendString(nil, c.Alias), ':')), col: ff.col}
		if ff.obj != "" {
			if objects[c.Name] || slices.Contains(above, ff.obj) {
				return nil, false
			}
			objects[c.Name] = true
			if sf.kids, ok = collectBelow(oc, c, ff.obj, above); !ok {
				return nil, false
			}
		}
		if len(c.Arguments) > 0 {
			sf.args = c.ArgumentMap(oc.Variables)
		}
		out = append(out, sf)
	}
	return out, true
}

// hasCustomDirective reports a directive other than skip and include,
// which field collection has already applied.
func hasCustomDirective(c graphql.CollectedField) bool {
	for _, d := range c.Directives {
		if d.Name != "skip" && d.Name != "include" {
			return true
		}
	}
	return false
}

// fastRootFields is the root-field middleware that answers a portal's
// conversation read, and the root turns field (fastTurns), itself (see
// above); drv, the driver ent's clients send their statements through,
// runs the hot path's.
func fastRootFields(drv dialect.Driver) graphql.RootFieldMiddleware {
	return func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		fc := graphql.GetRootFieldContext(ctx)
		if fc == nil || fc.Field.Name != "conversation" && fc.Field.Name != "turns" || !graphql.HasOperationContext(ctx) {
			return next(ctx)
		}
		oc := graphql.GetOperationContext(ctx)
		if oc.Operation == nil || oc.Operation.Operation != ast.Query {
			return next(ctx)
		}
		if fc.Field.Name == "turns" {
			return fastTurns(ctx, drv, oc, fc.Field, next)
		}
		sel, ok := collectFast(oc, fc.Field, "Conversation")
		if !ok {
			return next(ctx)
		}
		id, err := gid.UnmarshalID(fc.Field.ArgumentMap(oc.Variables)["id"])
		if err != nil {
			return next(ctx)
		}
		t := fastReads.Get().(*fastRead)
		t.drv, t.size = drv, 4<<10
		if ok, err := t.load(ctx, id, sel); err != nil || !ok {
			t.release()
			return next(ctx)
		}
		return graphql.WriterFunc(func(w io.Writer) {
			t.answer = t.conversation(slices.Grow(t.answer[:0], t.size), sel, t.cells[atConversation])
			_, _ = w.Write(t.answer)
			t.release()
		})
	}
}

// fastReads keeps what a read allocates (its rows, cells, indexes and the
// buffer its answer is written into before gqlgen copies it) for the next:
// a transcript is some thousand rows and some hundreds of kilobytes of
// JSON.
var fastReads = sync.Pool{New: func() any {
	return &fastRead{toolSpans: map[int64]span{}, modelSpans: map[int64]span{}, convAt: map[int64]int{}}
}}

// maxPooledAnswer is the largest answer buffer kept for the next read.
const maxPooledAnswer = 4 << 20

// release forgets the read's rows (so a pooled read keeps no one's text)
// and returns it to the pool.
func (t *fastRead) release() {
	if cap(t.answer) > maxPooledAnswer {
		return
	}
	clear(t.turns)
	clear(t.convs)
	clear(t.convAt)
	clear(t.toolCalls)
	clear(t.modelCalls)
	clear(t.toolSpans)
	clear(t.modelSpans)
	for i := range t.cells {
		clear(t.cells[i])
		t.cells[i] = t.cells[i][:0]
	}
	*t = fastRead{
		turns: t.turns[:0], convs: t.convs[:0], convAt: t.convAt, toolCalls: t.toolCalls[:0], modelCalls: t.modelCalls[:0],
		turnIDs: t.turnIDs[:0], toolSpans: t.toolSpans, modelSpans: t.modelSpans, answer: t.answer[:0], cells: t.cells,
	}
	fastReads.Put(t)
}

// The levels of a read, each with its own cells.
const (
	atConversation = iota
	atTurns
	atToolCalls
	atModelCalls
	levels
)

// fastRead is what the hot path loaded for one conversation, or for the
// root turns field (root).
type fastRead struct {
	drv    dialect.Driver
	convID int64
	root   bool
	// convs are the conversations read, the one of a transcript or those
	// of the root's turns; convAt indexes the latter by id.
	convs   []convRow
	convAt  map[int64]int
	turns   []turnRow
	hasNext bool
	hasPrev bool
	// order is the turns' order, which their cursors hold the values of;
	// total their count, when the selection asks for it.
	order []orderTerm
	total int
	// lo and hi are the least and greatest numbers of the turns read.
	lo, hi int64
	// toolCalls and modelCalls are ordered by turn id; a turn's are the
	// span its id maps to.
	toolCalls  []toolCallRow
	toolSpans  map[int64]span
	modelCalls []modelCallRow
	modelSpans map[int64]span
	turnIDs    []int64 // the turns read, on PostgreSQL
	// cells are the columns read of each level's rows, a row's from its at.
	cells  [levels][]colValue
	size   int // a guess at the answer's length, to size its buffer once
	answer []byte
	w      byteWriter
}

// span is a turn's rows [lo, hi) of a list ordered by turn id.
type span struct{ lo, hi int }

// extend adds row i of turn id to spans.
func extend(spans map[int64]span, id int64, i int) {
	s, ok := spans[id]
	if !ok {
		s.lo = i
	}
	s.hi = i + 1
	spans[id] = s
}

// The rows the hot path reads, scanned straight from the driver (not into
// ent's entities, whose per-column scanning was most of the read's
// allocation): what the read itself needs (ids, the keys rows are grouped
// by, what it computes from), and at, where the row's cells start, one for
// each column the selection names.
type (
	turnRow struct {
		id, number, convID int64
		startedAt          time.Time
		at                 int
	}
	convRow struct {
		id int64
		at int
		// user and agent: the user or agent asked for is within reach.
		user, agent bool
	}
	toolCallRow struct {
		turnID   int64
		failures []schematype.ItemFailure
		resultID sql.NullInt64
		at       int
	}
	modelCallRow struct {
		turnID, inputTokens, cacheReadTokens, cacheWriteTokens, prefixTokens, costMicros int64
		at                                                                               int
	}
)

// colValue is one column's value in a row read.
type colValue struct {
	s     string
	n     int64
	t     time.Time
	valid bool
}

// errNotServed leaves a read to the resolvers: a value the schema forbids
// to be null is, and they answer with their error.
var errNotServed = errors.New("not served")

// appendCell writes v as gqlgen writes col's scalar.
func appendCell(b []byte, col *fastColumn, v *colValue) []byte {
	if !v.valid {
		return append(b, "null"...)
	}
	switch col.kind {
	case kindID:
		return appendID(b, int(v.n))
	case kindInt:
		return strconv.AppendInt(b, v.n, 10)
	case kindBool:
		return strconv.AppendBool(b, v.n != 0)
	case kindEnum:
		return appendEnum(b, v.s)
	case kindTime:
		return appendTime(b, v.t)
	}
	return appendString(b, v.s)
}

// find returns the field named name in sel, or nil.
func find(sel []selField, name string) *selField {
	for i := range sel {
		if sel[i].name == name {
			return &sel[i]
		}
	}
	return nil
}

// page is what a turns field's arguments ask for: first/after or
// last/before, in order (by number, ascending, for a conversation's turns
// when orderBy is not given: the schema's default), of the turns where
// selects (a conversation's, or those the root field's where matches).
type page struct {
	limit         int
	after, before *entgql.Cursor[int]
	last          bool
	order         []orderTerm
	where         []func(*entsql.Selector)
}

// orderTerm is a column the turns are ordered by, and its direction.
type orderTerm struct {
	column string
	desc   bool
}

// pageCount is a page's length as first or last gives it, or false for one
// the hot path leaves to the resolvers: with 0 they count the turns for
// the page's info, and they refuse one out of range.
func pageCount(v any) (int, bool) {
	n, isInt := v.(int64)
	return int(n), isInt && n > 0 && n <= MaxPage
}

// pageCursor is an after or before cursor, or false for one the resolvers
// refuse.
func pageCursor(v any) (*entgql.Cursor[int], bool) {
	if v == nil {
		return nil, true
	}
	c := &entgql.Cursor[int]{}
	return c, c.UnmarshalGQL(v) == nil
}

// turnPage reads a conversation's turns field's arguments, or reports
// false for any the hot path leaves to the resolvers (which then answer or
// refuse them).
func turnPage(f *selField) (p page, ok bool) {
	var hasFirst, hasLast, desc bool
	for k, v := range f.args {
		switch k {
		case "first":
			if v == nil {
				continue
			}
			if p.limit, ok = pageCount(v); !ok {
				return page{}, false
			}
			hasFirst = true
		case "last":
			if v == nil {
				continue
			}
			if p.limit, ok = pageCount(v); !ok {
				return page{}, false
			}
			hasLast = true
		case "after":
			if p.after, ok = pageCursor(v); !ok {
				return page{}, false
			}
		case "before":
			if p.before, ok = pageCursor(v); !ok {
				return page{}, false
			}
		case "orderBy":
			list, isList := v.([]any)
			if !isList || len(list) != 1 {
				return page{}, false
			}
			o, isMap := list[0].(map[string]any)
			if !isMap || o["field"] != "NUMBER" {
				return page{}, false
			}
			switch o["direction"] {
			case nil, "ASC":
			case "DESC":
				desc = true
			default:
				return page{}, false
			}
		default:
			if v != nil {
				return page{}, false
			}
		}
	}
	if _, ordered := f.args["orderBy"]; !ordered || hasFirst == hasLast {
		return page{}, false
	}
	p.last = hasLast
	p.order = []orderTerm{{column: turn.FieldNumber, desc: desc}}
	return p, true
}

// policyWhere collects the predicates a privacy policy adds to a query:
// an entity's policy (tenancy.Policy) adds its reach through the query's
// Where method, which this stands in for.
type policyWhere []func(*entsql.Selector)

// Where records ps.
func (p *policyWhere) Where(ps ...func(*entsql.Selector)) { *p = append(*p, ps...) }

// scoped limits sel to the rows policy lets the viewer in ctx reach: it
// evaluates the entity's own privacy policy, as ent does before each of
// its queries, and applies the predicates it adds. A refusal is returned.
func scoped(ctx context.Context, policy entgo.Policy, sel *entsql.Selector) (*entsql.Selector, error) {
	var where policyWhere
	if err := policy.EvalQuery(ctx, &where); err != nil {
		return nil, err
	}
	for _, p := range where {
		p(sel)
	}
	return sel, nil
}

// columns is a statement's selected columns and where each is scanned.
// Every column the read converts itself is scanned into an interface
// value, which database/sql fills with the driver's value as it is: into
// a sql.Null* or an int64, each column would take the driver's value
// through a Scanner or reflection, a fifth of the scan's CPU.
type columns struct {
	table *entsql.SelectTable
	names []string
	dest  []any
	// sqlite reads times as text (addTimeAs), parsed as each row is taken.
	sqlite bool
	// scans are the selection's columns, in the order of their slots.
	scans []*scanCell
	// ints are the integer columns read for the read itself (a selection
	// naming one takes it from there) and the ids of joined tables, set
	// after each row; times the times it reads for itself.
	ints  []*intCol
	times []*timeCol
}

// timeCol is a time the read itself uses (a cursor's value), set into t.
type timeCol struct {
	sc scanCell
	t  *time.Time
}

// intCol is an integer column the read itself uses, set into n (a NULL
// fails the read) or, for a joined table's id, into null.
type intCol struct {
	column string
	v      any
	n      *int64
	null   *sql.NullInt64
}

// set converts the column's value as database/sql converts it into its
// destination.
func (ic *intCol) set() error {
	n, err := scanInt(ic.v)
	if err != nil {
		return fmt.Errorf("read %s: %w", ic.column, err)
	}
	if ic.null != nil {
		*ic.null = n
		return nil
	}
	if !n.Valid {
		return fmt.Errorf("read %s: %w", ic.column, errNullInt)
	}
	*ic.n = n.Int64
	return nil
}

// scanInt is v as database/sql scans it into a sql.NullInt64, an int64
// without a conversion (the one that escapes to the heap is made only for
// another type).
func scanInt(v any) (sql.NullInt64, error) {
	switch v := v.(type) {
	case int64:
		return sql.NullInt64{Int64: v, Valid: true}, nil
	case nil:
		return sql.NullInt64{}, nil
	}
	n := new(sql.NullInt64)
	err := n.Scan(v)
	return *n, err
}

// errNullInt fails a read whose own integer column is NULL.
var errNullInt = errors.New("null where an integer is read")

// scanCell is where a column of the selection is scanned.
type scanCell struct {
	col  *fastColumn
	id   *sql.NullInt64 // the id of its table's row, when joined
	from *int64         // the column as read for the read itself
	v    any
	// text: a time read as text (SQLite, addTimeAs).
	text bool
}

// cell is the column's value as its entity holds it, converted as
// database/sql converts a driver's value into the sql.Null* of its kind
// (the common types without a conversion at all).
func (sc *scanCell) cell() (colValue, error) {
	var v colValue
	switch sc.col.kind {
	case kindID, kindInt:
		n, err := scanInt(sc.v)
		v.n, v.valid = n.Int64, n.Valid
		return v, err
	case kindBool:
		switch x := sc.v.(type) {
		case bool:
			v.valid = true
			if x {
				v.n = 1
			}
		case int64:
			if x != 0 && x != 1 {
				return v, fmt.Errorf("read %s: %d is not a boolean", sc.col.column, x)
			}
			v.n, v.valid = x, true // as SQLite's driver gives a boolean
		case nil:
		default:
			var n sql.NullBool
			err := n.Scan(x)
			if v.valid = n.Valid; n.Bool {
				v.n = 1
			}
			return v, err
		}
	case kindString, kindEnum:
		switch x := sc.v.(type) {
		case string:
			v.s, v.valid = x, true
		case nil:
		default:
			var n sql.NullString
			err := n.Scan(x)
			v.s, v.valid = n.String, n.Valid
			return v, err
		}
	case kindTime:
		switch x := sc.v.(type) {
		case time.Time:
			v.t, v.valid = x, true
		case nil:
		case string:
			if !sc.text {
				return v, fmt.Errorf("read time: %q is not one", x)
			}
			t, err := time.ParseInLocation(db.SQLiteTime, x, time.UTC)
			if err != nil {
				return v, fmt.Errorf("read time: %w", err)
			}
			v.t, v.valid = t.UTC(), true
		default:
			var n sql.NullTime
			err := n.Scan(x)
			v.t, v.valid = n.Time, n.Valid
			return v, err
		}
	}
	return v, nil
}

// newColumns starts the columns of a statement on table.
func (t *fastRead) newColumns(b *entsql.DialectBuilder, table string) columns {
	return columns{table: b.Table(table), sqlite: t.drv.Dialect() == dialect.SQLite}
}

// add selects the integer column into dest when want (the selection names
// it).
func (c *columns) add(want bool, column string, dest *int64) {
	if want {
		c.addInt(c.table.C(column), &intCol{column: column, n: dest})
	}
}

// addRaw selects column into raw, its bytes as the driver gives them,
// when want.
func (c *columns) addRaw(want bool, column string, raw *sql.RawBytes) {
	if want {
		c.names, c.dest = append(c.names, c.table.C(column)), append(c.dest, raw)
	}
}

// addID selects name, a joined table's id, into id.
func (c *columns) addID(name string, id *sql.NullInt64) {
	c.addInt(name, &intCol{column: name, null: id})
}

func (c *columns) addInt(name string, ic *intCol) {
	c.names, c.dest = append(c.names, name), append(c.dest, &ic.v)
	c.ints = append(c.ints, ic)
}

// addTime selects the time column into dest, for the read itself.
func (c *columns) addTime(column string, dest *time.Time) {
	tc := &timeCol{sc: scanCell{col: &fastColumn{name: column, column: column, kind: kindTime}}, t: dest}
	c.addTimeAs(c.table.C(column), &tc.sc)
	c.times = append(c.times, tc)
}

// readInt is the integer column the read itself reads, or nil.
func (c *columns) readInt(column string) *int64 {
	for _, ic := range c.ints {
		if ic.n != nil && ic.column == column {
			return ic.n
		}
	}
	return nil
}

// addTimeAs selects the time named name (qualified) into sc. SQLite's
// driver parses a time column by trying layouts in turn, allocating an
// error for each miss, a seventh of a transcript read's allocation there;
// so on SQLite the column is read as text and parsed with the one layout
// it is written in. A time in another layout fails the read, which the
// resolvers then answer.
func (c *columns) addTimeAs(name string, sc *scanCell) {
	if c.sqlite {
		name, sc.text = "CAST("+name+" AS TEXT)", true
	}
	c.names, c.dest = append(c.names, name), append(c.dest, &sc.v)
}

// selected selects the columns sel names (qualified by qualify) and gives
// each its slot, a column named twice (under two aliases) one.
func (c *columns) selected(sel []selField, qualify func(string) string) {
	c.joined(sel, qualify, nil)
}

// joined selects the columns sel names of a table joined to the
// statement's, whose id is scanned into id: a row without one has none of
// them.
func (c *columns) joined(sel []selField, qualify func(string) string, id *sql.NullInt64) {
	for i := range sel {
		f := &sel[i]
		if f.col == nil {
			continue
		}
		f.slot = -1
		for j := range sel[:i] {
			if sel[j].col != nil && sel[j].col.column == f.col.column {
				f.slot = sel[j].slot
				break
			}
		}
		if f.slot >= 0 {
			continue
		}
		sc := &scanCell{col: f.col, id: id}
		f.slot = len(c.scans)
		c.scans = append(c.scans, sc)
		if id == nil && (f.col.kind == kindID || f.col.kind == kindInt) {
			if n := c.readInt(f.col.column); n != nil {
				sc.from = n
				continue
			}
		}
		name := qualify(f.col.column)
		if f.col.kind == kindTime {
			c.addTimeAs(name, sc)
			continue
		}
		c.names, c.dest = append(c.names, name), append(c.dest, &sc.v)
	}
}

// take appends the row's cells, each column's value as its entity holds
// it: a column the entity holds as a value, not a pointer, reads NULL as
// its zero value, as ent reads it.
func (c *columns) take(cells []colValue) ([]colValue, error) {
	for _, ic := range c.ints {
		if err := ic.set(); err != nil {
			return cells, err
		}
	}
	for _, tc := range c.times {
		v, err := tc.sc.cell()
		if err != nil {
			return cells, err
		}
		*tc.t = v.t
	}
	for _, sc := range c.scans {
		if sc.id != nil && !sc.id.Valid {
			cells = append(cells, colValue{})
			continue
		}
		if sc.from != nil {
			cells = append(cells, colValue{n: *sc.from, valid: true})
			continue
		}
		v, err := sc.cell()
		if err != nil {
			return cells, err
		}
		if sc.col.kind == kindTime && v.t.IsZero() {
			v.valid = false // gqlgen writes a zero time as null
		}
		if !v.valid && !sc.col.nullable && sc.col.kind != kindTime {
			v.valid = true
		}
		if !v.valid && sc.col.nonNull {
			return cells, errNotServed
		}
		cells = append(cells, v)
	}
	return cells, nil
}

// query runs sel through the driver (so statements are counted, traced and
// unescaped like ent's) and scans each row into dest and the level's
// cells, calling row after each with where its cells start.
func (t *fastRead) query(ctx context.Context, sel *entsql.Selector, c *columns, level int, row func(at int) error) error {
	query, args := sel.Query()
	var rows entsql.Rows
	if err := t.drv.Query(ctx, query, args, &rows); err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := rows.Scan(c.dest...); err != nil {
			return err
		}
		at := len(t.cells[level])
		var err error
		if t.cells[level], err = c.take(t.cells[level]); err != nil {
			return err
		}
		if err := row(at); err != nil {
			return err
		}
	}
	return rows.Err()
}

// load reads what sel asks for; false (with no error) leaves the field to
// the resolvers.
func (t *fastRead) load(ctx context.Context, id int, sel []selField) (bool, error) {
	turns := find(sel, "turns")
	var (
		node      []selField
		tc        *selField
		turnsRead chan error
		// toolsRead: the page's tool calls are read beside the turns
		// (their statement selects the page itself), so they cost the
		// read no round trip of their own; toolsSize is what they add to
		// the answer.
		toolsRead chan error
		toolsSize int
	)
	defer func() {
		if toolsRead != nil {
			<-toolsRead // every return waits for the read writing into t
		}
	}()
	waitTools := func() error {
		if toolsRead == nil {
			return nil
		}
		err := <-toolsRead
		toolsRead = nil
		t.size += toolsSize
		return err
	}
	if turns != nil {
		p, ok := turnPage(turns)
		if !ok || find(turns.kids, "totalCount") != nil {
			return false, nil // totalCount: the conversation's resolver counts with ent's loader, not its pager
		}
		p.where = []func(*entsql.Selector){func(s *entsql.Selector) {
			s.Where(entsql.EQ(s.C(turn.FieldConversationID), id))
		}}
		t.order = p.order
		if e := find(turns.kids, "edges"); e != nil {
			if n := find(e.kids, "node"); n != nil {
				node = n.kids
			}
		}
		// The page of turns is read beside the conversation, each limited
		// by its own policy, and kept only if the conversation is there.
		turnsRead = make(chan error, 1)
		go func() { turnsRead <- t.loadTurns(ctx, p, node) }()
		if tc = find(node, "toolCalls"); tc != nil {
			toolsRead = make(chan error, 1)
			go func() {
				n, err := t.loadToolCalls(ctx, p, tc.kids)
				toolsSize = n
				toolsRead <- err
			}()
		}
	}
	err := t.loadConversations(ctx, func(s *entsql.Selector) *entsql.Predicate {
		return entsql.EQ(s.C(conversation.FieldID), id)
	}, sel)
	if turnsRead != nil {
		err = cmp.Or(err, <-turnsRead)
	}
	found := len(t.convs) == 1 && t.convs[0].user && t.convs[0].agent
	if found {
		t.convID = t.convs[0].id
	}
	if err != nil || !found {
		return false, cmp.Or(err, waitTools()) // not there, not theirs, or its user or agent out of reach: the resolvers say so
	}
	if turns == nil {
		return true, waitTools()
	}
	// The model calls depend on the page of turns read: read while the
	// tool calls may still be.
	if err := t.loadPageModelCalls(ctx, node); err != nil {
		return false, cmp.Or(err, waitTools())
	}
	if err := waitTools(); err != nil {
		return false, err
	}
	return true, nil
}

// loadPageModelCalls reads the model calls of the page of turns read, when
// node (a turn's selection) asks for them or for the prompt's statistics,
// and adds them to the answer's size.
func (t *fastRead) loadPageModelCalls(ctx context.Context, node []selField) error {
	mc := find(node, "modelCalls")
	stats := find(node, "promptStats") != nil
	if len(t.turns) == 0 || mc == nil && !stats {
		return nil
	}
	t.turnIDs = t.turnIDs[:0]
	for i := range t.turns {
		t.turnIDs = append(t.turnIDs, t.turns[i].id)
	}
	var kids []selField
	if mc != nil {
		kids = mc.kids
	}
	if err := t.loadModelCalls(ctx, kids, stats); err != nil {
		return err
	}
	t.size += 256 * len(t.modelCalls)
	return nil
}

// loadConversations reads the conversations where selects (one, of a
// transcript; those of the root's page of turns), with their users and
// agents when asked, in one statement: each joined as a subquery limited
// by its own policy, so a user or agent out of reach reads as absent (its
// row's user or agent false), which the caller answers as it would a
// conversation out of reach: by leaving the read to the resolvers.
func (t *fastRead) loadConversations(ctx context.Context, where func(*entsql.Selector) *entsql.Predicate, sel []selField) error {
	b := t.builder()
	var (
		userID, agentID sql.NullInt64
		r               convRow
	)
	c := t.newColumns(b, conversation.Table)
	c.add(true, conversation.FieldID, &r.id)
	c.selected(sel, c.table.C)
	s := b.Select().From(c.table)
	s.Where(where(s))
	// join adds the subquery of table, as alias, limited by policy, and
	// the columns f selects of it.
	join := func(f *selField, table, alias, fk string, policy entgo.Policy, id *sql.NullInt64) error {
		var cols []string
		for _, k := range f.kids {
			if k.col != nil && k.col.column != "id" && !slices.Contains(cols, k.col.column) {
				cols = append(cols, k.col.column)
			}
		}
		jt := entsql.Table(table)
		names := []string{jt.C("id")}
		for _, col := range cols {
			names = append(names, jt.C(col))
		}
		js, err := scoped(ctx, policy, entsql.Select(names...).From(jt))
		if err != nil {
			return err
		}
		js.As(alias)
		s.LeftJoin(js).On(c.table.C(fk), js.C("id"))
		c.addID(js.C("id"), id)
		c.joined(f.kids, js.C, id)
		return nil
	}
	u, a := find(sel, "user"), find(sel, "agent")
	if u != nil {
		if err := join(u, user.Table, "u", conversation.FieldUserID, user.Policy, &userID); err != nil {
			return err
		}
	}
	if a != nil {
		if err := join(a, agent.Table, "a", conversation.FieldAgentID, agent.Policy, &agentID); err != nil {
			return err
		}
	}
	s.Select(c.names...)
	s, err := scoped(ctx, conversation.Policy, s)
	if err != nil {
		return err
	}
	return t.query(ctx, s, &c, atConversation, func(at int) error {
		r.at, r.user, r.agent = at, u == nil || userID.Valid, a == nil || agentID.Valid
		t.convs = append(t.convs, r)
		return nil
	})
}

// dialectBuilder is the statement builder of the driver's dialect.
func (t *fastRead) builder() *entsql.DialectBuilder { return entsql.Dialect(t.drv.Dialect()) }

// turnsPage limits s, a select from the turns table, to page p of the
// turns p.where selects (and one more, which says whether another page
// follows), each limited by its policy, as ent's pager reads a page: in
// p's order, then by id ascending; backward, every direction reversed, and
// the page turned round after.
func turnsPage(ctx context.Context, s *entsql.Selector, table *entsql.SelectTable, p page) (*entsql.Selector, error) {
	for _, w := range p.where {
		w(s)
	}
	s, err := scoped(ctx, turn.Policy, s)
	if err != nil {
		return nil, err
	}
	direction := func(desc bool) entgql.OrderDirection {
		if desc != p.last {
			return entgql.OrderDirectionDesc
		}
		return entgql.OrderDirectionAsc
	}
	order := func(column string, d entgql.OrderDirection) string {
		if d == entgql.OrderDirectionDesc {
			return entsql.Desc(column)
		}
		return column
	}
	fields, directions := make([]string, len(p.order)), make([]entgql.OrderDirection, len(p.order))
	terms := make([]string, 0, len(p.order)+1)
	for i, o := range p.order {
		fields[i], directions[i] = o.column, direction(o.desc)
		terms = append(terms, order(table.C(o.column), directions[i]))
	}
	idDir := direction(false)
	if p.after != nil || p.before != nil {
		preds, err := entgql.MultiCursorsPredicate(p.after, p.before, &entgql.MultiCursorsOptions{
			FieldID: turn.FieldID, DirectionID: idDir, Fields: fields, Directions: directions,
		})
		if err != nil {
			return nil, err
		}
		for _, pr := range preds {
			pr(s)
		}
	}
	return s.OrderBy(append(terms, order(table.C(turn.FieldID), idDir))...).Limit(p.limit + 1), nil
}

// loadTurns reads page p of turns, with the columns sel names, those its
// cursors hold, and the conversation's id when sel asks for it.
func (t *fastRead) loadTurns(ctx context.Context, p page, sel []selField) error {
	b := t.builder()
	var r turnRow
	c := t.newColumns(b, turn.Table)
	c.add(true, turn.FieldID, &r.id)
	c.add(true, turn.FieldNumber, &r.number)
	c.add(find(sel, "conversation") != nil, turn.FieldConversationID, &r.convID)
	if slices.Contains(p.order, orderTerm{turn.FieldStartedAt, false}) || slices.Contains(p.order, orderTerm{turn.FieldStartedAt, true}) {
		c.addTime(turn.FieldStartedAt, &r.startedAt)
	}
	c.selected(sel, c.table.C)
	s, err := turnsPage(ctx, b.Select(c.names...).From(c.table), c.table, p)
	if err != nil {
		return err
	}
	err = t.query(ctx, s, &c, atTurns, func(at int) error {
		r.at = at
		t.turns = append(t.turns, r)
		t.size += 256 + t.textLen(atTurns, at, len(c.scans))
		return nil
	})
	if err != nil {
		return err
	}
	t.hasNext, t.hasPrev = p.before != nil, p.after != nil
	if len(t.turns) > p.limit {
		if p.last {
			t.hasPrev = true
		} else {
			t.hasNext = true
		}
		t.turns = t.turns[:p.limit]
	}
	if p.last {
		slices.Reverse(t.turns)
	}
	for i := range t.turns {
		n := t.turns[i].number
		if i == 0 || n < t.lo {
			t.lo = n
		}
		if i == 0 || n > t.hi {
			t.hi = n
		}
	}
	return nil
}

// textLen is the length of the text in n cells of level from at, toward
// the answer's size.
func (t *fastRead) textLen(level, at, n int) int {
	l := 0
	for _, v := range t.cells[level][at : at+n] {
		l += len(v.s)
	}
	return l
}

// inPage selects the rows whose column names a turn of the page read. On
// PostgreSQL it is one array of the turns' ids (column = ANY($1)), which
// plans as one index scan; on SQLite, the page's range of numbers, unique
// in a conversation, so the statement keeps three arguments and one text
// (and one prepared statement) whatever the page's length, and the ids of
// the root's turns, which are of any conversation.
func (t *fastRead) inPage(column string) *entsql.Predicate {
	if t.drv.Dialect() == dialect.Postgres {
		return anyOf(column, t.turnIDs) // read only: the read is done with t.turnIDs before it returns
	}
	if t.root {
		ids := make([]any, len(t.turnIDs))
		for i, id := range t.turnIDs {
			ids[i] = id
		}
		return entsql.In(column, ids...)
	}
	tt := entsql.Table(turn.Table)
	return entsql.In(column, entsql.Select(tt.C(turn.FieldID)).From(tt).Where(entsql.And(
		entsql.EQ(tt.C(turn.FieldConversationID), t.convID),
		entsql.GTE(tt.C(turn.FieldNumber), t.lo),
		entsql.LTE(tt.C(turn.FieldNumber), t.hi),
	)))
}

// loadToolCalls reads the tool calls of page p of turns, with their results when asked, in one statement: the page's
// turns as a subquery (so the read need not wait for them), the results
// joined as a subquery limited by their own policy, so a result out of
// reach reads as none, as the resolver reads it. It returns what the
// calls add to the answer's size; the calls of the page's one turn more
// are read, and never written.
func (t *fastRead) loadToolCalls(ctx context.Context, p page, sel []selField) (int, error) {
	b := t.builder()
	var (
		r        toolCallRow
		failures sql.RawBytes
	)
	c := t.newColumns(b, toolcall.Table)
	c.add(true, toolcall.FieldTurnID, &r.turnID)
	c.addRaw(find(sel, "failures") != nil, toolcall.FieldFailures, &failures)
	c.selected(sel, c.table.C)
	tt := b.Table(turn.Table)
	ids, err := turnsPage(ctx, b.Select(tt.C(turn.FieldID)).From(tt), tt, p)
	if err != nil {
		return 0, err
	}
	s := b.Select().From(c.table).Where(entsql.In(c.table.C(toolcall.FieldTurnID), ids))
	if result := find(sel, "result"); result != nil {
		rt := entsql.Table(storedresult.Table)
		names := []string{rt.C(storedresult.FieldID)}
		for _, k := range result.kids {
			if k.col != nil && k.col.column != storedresult.FieldID && !slices.Contains(names, rt.C(k.col.column)) {
				names = append(names, rt.C(k.col.column))
			}
		}
		rs, err := scoped(ctx, storedresult.Policy, entsql.Select(names...).From(rt))
		if err != nil {
			return 0, err
		}
		rs.As("r")
		s.LeftJoin(rs).On(c.table.C(toolcall.FieldResultID), rs.C(storedresult.FieldID))
		c.addID(rs.C(storedresult.FieldID), &r.resultID)
		c.joined(result.kids, rs.C, &r.resultID)
	}
	s.Select(c.names...)
	s, err = scoped(ctx, toolcall.Policy, s)
	if err != nil {
		return 0, err
	}
	s.OrderBy(c.table.C(toolcall.FieldTurnID), c.table.C(toolcall.FieldPosition))
	size := 0
	err = t.query(ctx, s, &c, atToolCalls, func(at int) error {
		r.at = at
		r.failures = nil
		if len(failures) > 0 && string(failures) != "null" && string(failures) != "[]" {
			if err := json.Unmarshal(failures, &r.failures); err != nil {
				return fmt.Errorf("decode failures: %w", err)
			}
		}
		extend(t.toolSpans, r.turnID, len(t.toolCalls))
		t.toolCalls = append(t.toolCalls, r)
		size += 352 + t.textLen(atToolCalls, at, len(c.scans))
		return nil
	})
	return size, err
}

// anyOf is PostgreSQL's column = ANY($1), one argument for all of ids.
func anyOf(column string, ids []int64) *entsql.Predicate {
	return entsql.P(func(b *entsql.Builder) {
		b.Ident(column).WriteString(" = ANY(").Arg(idArray(ids)).WriteString(")")
	})
}

// idArray is a PostgreSQL bigint[] of ids, its text written in one buffer
// of its length.
type idArray []int64

// Value is the array's text, {1,2,3}.
func (a idArray) Value() (driver.Value, error) {
	n := 2
	for _, id := range a {
		n += 1 + len(strconv.AppendInt(make([]byte, 0, 20), id, 10))
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, id := range a {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return append(b, '}'), nil
}

func (t *fastRead) loadModelCalls(ctx context.Context, sel []selField, stats bool) error {
	b := t.builder()
	var r modelCallRow
	c := t.newColumns(b, modelcall.Table)
	c.add(true, modelcall.FieldTurnID, &r.turnID)
	c.add(stats, modelcall.FieldInputTokens, &r.inputTokens)
	c.add(stats, modelcall.FieldCacheReadTokens, &r.cacheReadTokens)
	c.add(stats, modelcall.FieldCacheWriteTokens, &r.cacheWriteTokens)
	c.add(stats, modelcall.FieldPrefixTokens, &r.prefixTokens)
	c.add(find(sel, "costAmount") != nil, modelcall.FieldCostMicros, &r.costMicros)
	c.selected(sel, c.table.C)
	s, err := scoped(ctx, modelcall.Policy, b.Select(c.names...).From(c.table).
		Where(t.inPage(c.table.C(modelcall.FieldTurnID))))
	if err != nil {
		return err
	}
	s.OrderBy(c.table.C(modelcall.FieldTurnID), c.table.C(modelcall.FieldStep))
	return t.query(ctx, s, &c, atModelCalls, func(at int) error {
		r.at = at
		extend(t.modelSpans, r.turnID, len(t.modelCalls))
		t.modelCalls = append(t.modelCalls, r)
		return nil
	})
}

// The writers below append a type's selected fields as gqlgen writes them:
// keys in selection order, a column's value as gqlgen's marshaller for its
// scalar writes it (appendCell), the rest by hand.

// appendFields writes an object of the selected fields: a column from
// cells, __typename as typename, and any other by computed.
func appendFields(b []byte, sel []selField, cells []colValue, typename string, computed func([]byte, *selField) []byte) []byte {
	b = append(b, '{')
	for i := range sel {
		f := &sel[i]
		b = key(b, i, f.key)
		switch {
		case f.col != nil:
			b = appendCell(b, f.col, &cells[f.slot])
		case f.name == "__typename":
			b = appendString(b, typename)
		default:
			b = computed(b, f)
		}
	}
	return append(b, '}')
}

// noComputed is computed for a type with columns only.
func noComputed(b []byte, _ *selField) []byte { return append(b, "null"...) }

// conversation writes the conversation whose row's cells are cells.
func (t *fastRead) conversation(b []byte, sel []selField, cells []colValue) []byte {
	return appendFields(b, sel, cells, "Conversation", func(b []byte, f *selField) []byte {
		switch f.name {
		case "user":
			return appendFields(b, f.kids, cells, "User", noComputed)
		case "agent":
			return appendFields(b, f.kids, cells, "Agent", noComputed)
		case "turns":
			return t.connection(b, f.kids)
		}
		return append(b, "null"...)
	})
}

func (t *fastRead) connection(b []byte, sel []selField) []byte {
	cursor := func(b []byte, tu *turnRow) []byte {
		// As ent's pager makes it: the id, and the value of each field
		// of the order, as the entity holds it.
		values := make([]any, len(t.order))
		for i, o := range t.order {
			if o.column == turn.FieldStartedAt {
				values[i] = tu.startedAt
			} else {
				values[i] = int(tu.number)
			}
		}
		return t.appendMarshaler(b, entgql.Cursor[int]{ID: int(tu.id), Value: values})
	}
	return appendObject(b, sel, func(b []byte, f *selField) []byte {
		switch f.name {
		case "totalCount":
			return strconv.AppendInt(b, int64(t.total), 10)
		case "pageInfo":
			return appendObject(b, f.kids, func(b []byte, f *selField) []byte {
				switch f.name {
				case "hasNextPage":
					return strconv.AppendBool(b, t.hasNext)
				case "hasPreviousPage":
					return strconv.AppendBool(b, t.hasPrev)
				case "startCursor", "endCursor":
					if len(t.turns) == 0 {
						return append(b, "null"...)
					}
					if f.name == "startCursor" {
						return cursor(b, &t.turns[0])
					}
					return cursor(b, &t.turns[len(t.turns)-1])
				}
				return appendString(b, "PageInfo")
			})
		case "edges":
			b = append(b, '[')
			for i := range t.turns {
				tu := &t.turns[i]
				if i > 0 {
					b = append(b, ',')
				}
				b = appendObject(b, f.kids, func(b []byte, f *selField) []byte {
					switch f.name {
					case "node":
						return t.turn(b, tu, f.kids)
					case "cursor":
						return cursor(b, tu)
					}
					return appendString(b, "TurnEdge")
				})
			}
			return append(b, ']')
		}
		return appendString(b, "TurnConnection")
	})
}

func (t *fastRead) turn(b []byte, tu *turnRow, sel []selField) []byte {
	return appendFields(b, sel, t.cells[atTurns][tu.at:], "Turn", func(b []byte, f *selField) []byte {
		switch f.name {
		case "promptStats":
			// As promptStats (turn.go) sums them for the resolver.
			calls := t.turnModelCalls(tu.id)
			var prefix, input, cacheRead int
			for i := range calls {
				c := &calls[i]
				prefix = max(prefix, int(c.prefixTokens))
				input += int(c.inputTokens + c.cacheReadTokens + c.cacheWriteTokens)
				cacheRead += int(c.cacheReadTokens)
			}
			return appendObject(b, f.kids, func(b []byte, f *selField) []byte {
				switch f.name {
				case "prefixTokens":
					return strconv.AppendInt(b, int64(prefix), 10)
				case "inputTokens":
					return strconv.AppendInt(b, int64(input), 10)
				case "cacheReadTokens":
					return strconv.AppendInt(b, int64(cacheRead), 10)
				case "modelCalls":
					return strconv.AppendInt(b, int64(len(calls)), 10)
				}
				return appendString(b, "PromptStats")
			})
		case "modelCalls":
			b = append(b, '[')
			calls := t.turnModelCalls(tu.id)
			for i := range calls {
				if i > 0 {
					b = append(b, ',')
				}
				b = t.modelCall(b, &calls[i], f.kids)
			}
			return append(b, ']')
		case "conversation":
			// Each is there: the read was left to the resolvers otherwise.
			return t.conversation(b, f.kids, t.cells[atConversation][t.convs[t.convAt[tu.convID]].at:])
		case "toolCalls":
			b = append(b, '[')
			sp := t.toolSpans[tu.id]
			calls := t.toolCalls[sp.lo:sp.hi]
			for i := range calls {
				if i > 0 {
					b = append(b, ',')
				}
				b = t.toolCall(b, &calls[i], f.kids)
			}
			return append(b, ']')
		}
		return append(b, "null"...)
	})
}

// turnModelCalls are the model calls of turn id.
func (t *fastRead) turnModelCalls(id int64) []modelCallRow {
	sp := t.modelSpans[id]
	return t.modelCalls[sp.lo:sp.hi]
}

func (t *fastRead) modelCall(b []byte, m *modelCallRow, sel []selField) []byte {
	return appendFields(b, sel, t.cells[atModelCalls][m.at:], "ModelCall", func(b []byte, f *selField) []byte {
		// costAmount, the one field computed.
		return appendObject(b, f.kids, func(b []byte, f *selField) []byte {
			switch f.name {
			case "amount":
				return appendString(b, schematype.Micros(m.costMicros).Amount())
			case "micros":
				return strconv.AppendInt(b, m.costMicros, 10)
			case "currency":
				return appendString(b, schematype.Currency)
			}
			return appendString(b, "Money")
		})
	})
}

func (t *fastRead) toolCall(b []byte, c *toolCallRow, sel []selField) []byte {
	return appendFields(b, sel, t.cells[atToolCalls][c.at:], "ToolCall", func(b []byte, f *selField) []byte {
		switch f.name {
		case "failures":
			b = append(b, '[')
			for i := range c.failures {
				if i > 0 {
					b = append(b, ',')
				}
				it := &c.failures[i]
				b = appendObject(b, f.kids, func(b []byte, f *selField) []byte {
					switch f.name {
					case "item":
						return strconv.AppendInt(b, int64(it.Item), 10)
					case "input":
						return appendString(b, it.Input)
					case "kind":
						return t.appendMarshaler(b, it.Kind)
					case "message":
						return appendString(b, it.Message)
					}
					return appendString(b, "ItemFailure")
				})
			}
			return append(b, ']')
		case "result":
			if !c.resultID.Valid {
				return append(b, "null"...)
			}
			return appendFields(b, f.kids, t.cells[atToolCalls][c.at:], "StoredResult", noComputed)
		}
		return append(b, "null"...)
	})
}

// appendObject writes an object of the selected fields, each value by
// value (which writes __typename for a name it does not know).
func appendObject(b []byte, sel []selField, value func([]byte, *selField) []byte) []byte {
	b = append(b, '{')
	for i := range sel {
		f := &sel[i]
		b = key(b, i, f.key)
		b = value(b, f)
	}
	return append(b, '}')
}

func key(b []byte, i int, key string) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	return append(b, key...)
}

func appendID(b []byte, id int) []byte {
	b = append(b, '"')
	b = gid.Append(b, id)
	return append(b, '"')
}

func appendTime(b []byte, v time.Time) []byte {
	if v.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = v.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendEnum writes an enum's value as its MarshalGQL does (ent's enums,
// schematype's kinds): quoted by strconv.Quote, which leaves printable
// ASCII but the quote and the backslash as it is.
func appendEnum(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return strconv.AppendQuote(b, v)
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

const hexDigits = "0123456789ABCDEF"

// appendString quotes s as gqlgen's MarshalString does: only control
// characters, backslash and the double quote are escaped, and bytes that
// are not UTF-8 are written as they are. It goes byte by byte (no byte of
// a character of more than one is below 0x80), copying the runs between
// the bytes it escapes.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !mustEscape[c] {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '\t':
			b = append(b, `\t`...)
		case '\r':
			b = append(b, `\r`...)
		case '\n':
			b = append(b, `\n`...)
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		default:
			b = append(b, `\u00`...)
			b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// mustEscape marks the bytes appendString escapes.
var mustEscape = func() (m [256]bool) {
	for c := range 0x20 {
		m[c] = true
	}
	m['\\'], m['"'] = true, true
	return m
}()

// byteWriter lets a graphql.Marshaler append to a slice.
type byteWriter struct{ b []byte }

func (w *byteWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// appendMarshaler appends what m writes, through the read's one writer.
func (t *fastRead) appendMarshaler(b []byte, m graphql.Marshaler) []byte {
	t.w.b = b
	m.MarshalGQL(&t.w)
	b, t.w.b = t.w.b, nil
	return b
}

// transcriptTypes are the types whose every field the hot path writes,
// but those named in resolvedFields (TestTranscriptFieldsServed, which
// also walks the types of computedFields and fastEntities, and checks
// that they hold every type the root fields reach).
var transcriptTypes = []string{"Conversation", "Turn", "ModelCall", "ToolCall", "StoredResult"}

// resolvedFields are the transcript types' fields the hot path leaves to
// their resolvers: a selection naming any is answered by them whole.
var resolvedFields = map[string][]string{
	// Lists of their own, each its own read (tasks from the workspace,
	// summaries and attachments by their own loaders).
	"Conversation": {"tasks", "summaries", "attachments"},
	// suggestions and clarification are JSON a resolver decodes and
	// checks; grounding merges spans across the turn's results; the
	// pending approvals and the ratings are rows of their own (the
	// caller's rating depends on who asks).
	"Turn": {"suggestions", "clarification", "grounding", "pendingApprovals", "myRating", "ratings"},
	// attribution is shown to admins only (a resolver with side logic);
	// cost is the deprecated float.
	"ModelCall": {"cost", "attribution"},
	// evidence and repairs are JSON columns a resolver reads only when
	// asked; turn goes back up the graph; approval is a row of its own.
	"ToolCall": {"evidence", "repairs", "turn", "approval"},
	// The organisation's, another entity's; and lists of the agent's,
	// JSON columns, and its approval rules, rows of their own.
	"User":  {"organizationName", "organization"},
	"Agent": {"approvals", "tools", "skills"},
}
