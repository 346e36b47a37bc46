package graph

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
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

	"github.com/toolgate/toolgate/ent"
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
// and allocation. fastConversation answers such a read itself: it loads
// the conversation with its user and agent, then each level, in one
// statement each, every table limited by its entity's own privacy policy
// as ent limits its queries (scoped), sent through ent's driver, reading
// only the columns asked for into plain rows; it writes the JSON straight
// into one pooled buffer with the same encodings gqlgen uses, so the
// answer is the one the resolvers give, byte for byte
// (TestFastTranscriptMatchesResolvers).
//
// It takes a `conversation` field when every field selected under it is
// one it writes (fastTypes; what it leaves to the resolvers is named in
// resolvedFields, and TestTranscriptFieldsServed fails for a field of the
// transcript's types on neither list) and the turns page forward
// (first/after) or backward (last/before) by number, either direction, the
// schema's default being NUMBER ASC. Anything else (first or last 0,
// STARTED_AT, where, totalCount, turns selected twice), and any error,
// leaves the field to the resolvers, which then answer or refuse exactly
// as before.

// selField is a field of the selection, with its sub-selection.
type selField struct {
	alias, name string
	kids        []selField
	args        map[string]any
}

// fastTypes lists, per type the hot path writes, the fields it knows: a
// leaf ("") or the type of an object or list of objects.
var fastTypes = map[string]map[string]string{
	"Conversation":   {"id": "", "title": "", "createdAt": "", "updatedAt": "", "archivedAt": "", "turnsCount": "", "user": "User", "agent": "Agent", "turns": "TurnConnection", "__typename": ""},
	"User":           {"id": "", "name": "", "department": "", "__typename": ""},
	"Agent":          {"id": "", "name": "", "__typename": ""},
	"TurnConnection": {"pageInfo": "PageInfo", "edges": "TurnEdge", "__typename": ""},
	"PageInfo":       {"hasNextPage": "", "hasPreviousPage": "", "startCursor": "", "endCursor": "", "__typename": ""},
	"TurnEdge":       {"node": "Turn", "cursor": "", "__typename": ""},
	"Turn": {"id": "", "number": "", "status": "", "startedAt": "", "finishedAt": "", "timeZone": "", "userText": "", "answer": "",
		"error": "", "replayed": "", "superseded": "", "promptStats": "PromptStats", "modelCalls": "ModelCall", "toolCalls": "ToolCall", "__typename": ""},
	"PromptStats": {"prefixTokens": "", "inputTokens": "", "cacheReadTokens": "", "modelCalls": "", "__typename": ""},
	"ModelCall": {"step": "", "kind": "", "model": "", "text": "", "provider": "", "startedAt": "", "durationMs": "", "inputTokens": "", "cacheReadTokens": "", "cacheWriteTokens": "",
		"outputTokens": "", "prefixTokens": "", "costAmount": "Money", "__typename": ""},
	"Money": {"amount": "", "micros": "", "currency": "", "__typename": ""},
	"ToolCall": {"id": "", "position": "", "name": "", "arguments": "", "outcome": "", "attempts": "", "message": "", "ref": "",
		"guardrail": "", "argumentsRef": "", "startedAt": "", "finishedAt": "", "failures": "ItemFailure", "result": "StoredResult", "__typename": ""},
	"ItemFailure":  {"item": "", "input": "", "kind": "", "message": "", "__typename": ""},
	"StoredResult": {"id": "", "ref": "", "kind": "", "chars": "", "bytes": "", "items": "", "truncatedAtSource": "", "createdAt": "", "updatedAt": "", "__typename": ""},
}

// implementors are the type conditions each type satisfies.
var implementors = map[string][]string{
	"Conversation": {"Conversation", "Node"}, "User": {"User", "Node"}, "Agent": {"Agent", "Node"},
	"Turn": {"Turn", "Node"}, "ToolCall": {"ToolCall", "Node"}, "StoredResult": {"StoredResult", "Node"},
}

// collectFast collects the selection of a field of type typ, or reports
// false when it selects anything the hot path does not write. An object
// field may be selected once only (under one alias).
func collectFast(oc *graphql.OperationContext, f graphql.CollectedField, typ string) ([]selField, bool) {
	known := fastTypes[typ]
	sat := implementors[typ]
	if sat == nil {
		sat = []string{typ}
	}
	var out []selField
	objects := map[string]bool{}
	for _, c := range graphql.CollectFields(oc, f.Selections, sat) {
		kind, ok := known[c.Name]
		if !ok || len(c.Directives) > 0 && hasCustomDirective(c) {
			return nil, false
		}
		sf := selField{alias: c.Alias, name: c.Name}
		if kind != "" {
			if objects[c.Name] {
				return nil, false
			}
			objects[c.Name] = true
			if sf.kids, ok = collectFast(oc, c, kind); !ok {
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

// fastConversation is the root-field middleware that answers a portal's
// conversation read itself (see above); drv, the driver ent's clients
// send their statements through, runs the hot path's.
func fastConversation(drv dialect.Driver) graphql.RootFieldMiddleware {
	return func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		fc := graphql.GetRootFieldContext(ctx)
		if fc == nil || fc.Field.Name != "conversation" || !graphql.HasOperationContext(ctx) {
			return next(ctx)
		}
		oc := graphql.GetOperationContext(ctx)
		if oc.Operation == nil || oc.Operation.Operation != ast.Query {
			return next(ctx)
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
			t.answer = t.conversation(slices.Grow(t.answer[:0], t.size), sel)
			_, _ = w.Write(t.answer)
			t.release()
		})
	}
}

// fastReads keeps what a read allocates (its rows, indexes and the buffer
// its answer is written into before gqlgen copies it) for the next: a
// transcript is some thousand rows and some hundreds of kilobytes of JSON.
var fastReads = sync.Pool{New: func() any {
	return &fastRead{toolSpans: map[int64]span{}, modelSpans: map[int64]span{}, resultAt: map[int64]int{}}
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
	clear(t.toolCalls)
	clear(t.modelCalls)
	clear(t.results)
	clear(t.toolSpans)
	clear(t.modelSpans)
	clear(t.resultAt)
	*t = fastRead{
		turns: t.turns[:0], toolCalls: t.toolCalls[:0], modelCalls: t.modelCalls[:0], results: t.results[:0], resultIDs: t.resultIDs[:0], turnIDs: t.turnIDs[:0],
		toolSpans: t.toolSpans, modelSpans: t.modelSpans, resultAt: t.resultAt, answer: t.answer[:0],
	}
	fastReads.Put(t)
}

// fastRead is what the hot path loaded for one conversation.
type fastRead struct {
	drv     dialect.Driver
	conv    *ent.Conversation
	turns   []turnRow
	hasNext bool
	hasPrev bool
	// lo and hi are the least and greatest numbers of the turns read.
	lo, hi int64
	// toolCalls and modelCalls are ordered by turn id; a turn's are the
	// span its id maps to.
	toolCalls  []toolCallRow
	toolSpans  map[int64]span
	modelCalls []modelCallRow
	modelSpans map[int64]span
	results    []resultRow
	resultAt   map[int64]int // index in results by id
	resultIDs  []int64       // the results of the tool calls read
	turnIDs    []int64       // the turns read, on PostgreSQL
	size       int           // a guess at the answer's length, to size its buffer once
	answer     []byte
	w          byteWriter
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

// The rows the hot path reads, scanned straight from the driver into
// these (not into ent's entities, whose per-column scanning was most of
// the read's allocation). A column the selection does not name is not
// read and keeps its zero value.
type (
	turnRow struct {
		id, number            int64
		status                string
		startedAt, finishedAt sql.NullTime
		timeZone, userText    string
		answer, errText       sql.NullString
		replayed, superseded  bool
	}
	toolCallRow struct {
		id, turnID, position, attempts   int64
		name, arguments, outcome         string
		message, ref, guardrail, argsRef sql.NullString
		startedAt, finishedAt            sql.NullTime
		failures                         []schematype.ItemFailure
		resultID                         sql.NullInt64
	}
	resultRow struct {
		id, chars, bytes, items int64
		ref, kind               string
		truncatedAtSource       bool
		createdAt, updatedAt    sql.NullTime
	}
	modelCallRow struct {
		turnID, step, durationMs, inputTokens, cacheReadTokens, cacheWriteTokens, outputTokens, prefixTokens, costMicros int64
		kind, model, text, provider                                                                                      string
		startedAt                                                                                                        sql.NullTime
	}
)

// find returns the field named name in sel, or nil.
func find(sel []selField, name string) *selField {
	for i := range sel {
		if sel[i].name == name {
			return &sel[i]
		}
	}
	return nil
}

// page is what the turns field's arguments ask for: first/after or
// last/before, by number in either direction (by number, ascending, when
// orderBy is not given: the schema's default).
type page struct {
	limit         int
	after, before *entgql.Cursor[int]
	last, desc    bool
}

// turnPage reads the turns field's arguments, or reports false for any the
// hot path leaves to the resolvers (which then answer or refuse them).
func turnPage(f *selField) (p page, ok bool) {
	var hasFirst, hasLast bool
	count := func(v any) (int, bool) {
		n, isInt := v.(int64)
		return int(n), isInt && n > 0 && n <= MaxPage // with 0 the resolvers count the turns for the page's info
	}
	cursor := func(v any) (*entgql.Cursor[int], bool) {
		if v == nil {
			return nil, true
		}
		c := &entgql.Cursor[int]{}
		return c, c.UnmarshalGQL(v) == nil
	}
	for k, v := range f.args {
		switch k {
		case "first":
			if v == nil {
				continue
			}
			if p.limit, ok = count(v); !ok {
				return page{}, false
			}
			hasFirst = true
		case "last":
			if v == nil {
				continue
			}
			if p.limit, ok = count(v); !ok {
				return page{}, false
			}
			hasLast = true
		case "after":
			if p.after, ok = cursor(v); !ok {
				return page{}, false
			}
		case "before":
			if p.before, ok = cursor(v); !ok {
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
				p.desc = true
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
type columns struct {
	table *entsql.SelectTable
	names []string
	dest  []any
	// sqlite reads times as text (addTime), parsed after each row.
	sqlite bool
	times  []textTime
}

// textTime is a time read as text, and where it goes once parsed.
type textTime struct {
	text *sql.NullString
	dest *sql.NullTime
}

// sqliteTime is the layout the database writes times in on SQLite, in
// UTC (ent/db).
const sqliteTime = "2006-01-02 15:04:05.999999999-07:00"

// newColumns starts the columns of a statement on table.
func (t *fastRead) newColumns(b *entsql.DialectBuilder, table string) columns {
	return columns{table: b.Table(table), sqlite: t.drv.Dialect() == dialect.SQLite}
}

// add selects column into dest when want (the selection names it).
func (c *columns) add(want bool, column string, dest any) {
	if want {
		c.names = append(c.names, c.table.C(column))
		c.dest = append(c.dest, dest)
	}
}

// addTime selects a time column into dest when want. SQLite's driver
// parses a time column by trying layouts in turn, allocating an error for
// each miss, a seventh of a transcript read's allocation there; so on
// SQLite the column is read as text and parsed with the one layout it is
// written in. A time in another layout fails the read, which the
// resolvers then answer.
func (c *columns) addTime(want bool, column string, dest *sql.NullTime) {
	if !want {
		return
	}
	if !c.sqlite {
		c.add(true, column, dest)
		return
	}
	text := new(sql.NullString)
	c.names = append(c.names, "CAST("+c.table.C(column)+" AS TEXT)")
	c.dest = append(c.dest, text)
	c.times = append(c.times, textTime{text: text, dest: dest})
}

// parseTimes parses the times read as text.
func (c *columns) parseTimes() error {
	for _, tt := range c.times {
		if !tt.text.Valid {
			*tt.dest = sql.NullTime{}
			continue
		}
		v, err := time.ParseInLocation(sqliteTime, tt.text.String, time.UTC)
		if err != nil {
			return fmt.Errorf("read time: %w", err)
		}
		*tt.dest = sql.NullTime{Time: v.UTC(), Valid: true}
	}
	return nil
}

// query runs sel through the driver (so statements are counted, traced and
// unescaped like ent's) and scans each row into dest, calling row after
// each.
func (t *fastRead) query(ctx context.Context, sel *entsql.Selector, c *columns, row func() error) error {
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
		if err := c.parseTimes(); err != nil {
			return err
		}
		if err := row(); err != nil {
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
		turnsRead chan error
	)
	if turns != nil {
		p, ok := turnPage(turns)
		if !ok {
			return false, nil
		}
		if e := find(turns.kids, "edges"); e != nil {
			if n := find(e.kids, "node"); n != nil {
				node = n.kids
			}
		}
		// The page of turns is read beside the conversation, each limited
		// by its own policy, and kept only if the conversation is there.
		turnsRead = make(chan error, 1)
		go func() { turnsRead <- t.loadTurns(ctx, id, p, node) }()
	}
	conv, err := t.loadConversation(ctx, id, find(sel, "user") != nil, find(sel, "agent") != nil)
	if turnsRead != nil {
		err = cmp.Or(err, <-turnsRead)
	}
	if err != nil || conv == nil {
		return false, err // not there, not theirs, or its user or agent out of reach: the resolvers say so
	}
	t.conv = conv
	if turns == nil {
		return true, nil
	}
	if len(t.turns) == 0 {
		return true, nil
	}
	t.turnIDs = t.turnIDs[:0]
	for i := range t.turns {
		t.turnIDs = append(t.turnIDs, t.turns[i].id)
	}
	tc, mc := find(node, "toolCalls"), find(node, "modelCalls")
	stats := find(node, "promptStats") != nil
	// The model calls depend on the page of turns alone: read beside the
	// tool calls and their results, on a connection of their own, they
	// cost the read no round trip of its own.
	var (
		modelCalls = make(chan error, 1)
		both       = tc != nil && (mc != nil || stats)
	)
	if mc != nil || stats {
		var kids []selField
		if mc != nil {
			kids = mc.kids
		}
		if both {
			go func() { modelCalls <- t.loadModelCalls(ctx, kids, stats) }()
		} else if err := t.loadModelCalls(ctx, kids, stats); err != nil {
			return false, err
		}
	}
	if tc != nil {
		err := t.loadToolCalls(ctx, tc.kids)
		if both {
			err = cmp.Or(err, <-modelCalls)
		}
		if err != nil {
			return false, err
		}
	}
	t.size += 256 * len(t.modelCalls)
	return true, nil
}

// loadConversation reads conversation id, with its user and agent when
// asked, in one statement: each joined as a subquery limited by its own
// policy, so a user or agent out of reach reads as absent, and then nil
// is returned, as for a conversation out of reach.
func (t *fastRead) loadConversation(ctx context.Context, id int, withUser, withAgent bool) (*ent.Conversation, error) {
	b := t.builder()
	var (
		cv                   ent.Conversation
		title                sql.NullString
		createdAt, updatedAt sql.NullTime
		archivedAt           sql.NullTime
		turnsCount           int64
		userID, agentID      sql.NullInt64
		userName, department sql.NullString
		agentName            sql.NullString
	)
	c := t.newColumns(b, conversation.Table)
	c.add(true, conversation.FieldID, &cv.ID)
	c.add(true, conversation.FieldTitle, &title)
	c.addTime(true, conversation.FieldCreatedAt, &createdAt)
	c.addTime(true, conversation.FieldUpdatedAt, &updatedAt)
	c.addTime(true, conversation.FieldArchivedAt, &archivedAt)
	c.add(true, conversation.FieldTurnsCount, &turnsCount)
	s := b.Select().From(c.table).Where(entsql.EQ(c.table.C(conversation.FieldID), id))
	if withUser {
		ut := entsql.Table(user.Table)
		us, err := scoped(ctx, user.Policy, entsql.Select(ut.C(user.FieldID), ut.C(user.FieldName), ut.C(user.FieldDepartment)).From(ut))
		if err != nil {
			return nil, err
		}
		us.As("u")
		s.LeftJoin(us).On(c.table.C(conversation.FieldUserID), us.C(user.FieldID))
		c.names = append(c.names, us.C(user.FieldID), us.C(user.FieldName), us.C(user.FieldDepartment))
		c.dest = append(c.dest, &userID, &userName, &department)
	}
	if withAgent {
		at := entsql.Table(agent.Table)
		as, err := scoped(ctx, agent.Policy, entsql.Select(at.C(agent.FieldID), at.C(agent.FieldName)).From(at))
		if err != nil {
			return nil, err
		}
		as.As("a")
		s.LeftJoin(as).On(c.table.C(conversation.FieldAgentID), as.C(agent.FieldID))
		c.names = append(c.names, as.C(agent.FieldID), as.C(agent.FieldName))
		c.dest = append(c.dest, &agentID, &agentName)
	}
	s.Select(c.names...)
	s, err := scoped(ctx, conversation.Policy, s)
	if err != nil {
		return nil, err
	}
	found := false
	err = t.query(ctx, s, &c, func() error {
		found = true
		return nil
	})
	if err != nil || !found || withUser && !userID.Valid || withAgent && !agentID.Valid {
		return nil, err
	}
	if title.Valid {
		cv.Title = &title.String
	}
	cv.CreatedAt, cv.UpdatedAt, cv.TurnsCount = createdAt.Time, updatedAt.Time, int(turnsCount)
	if archivedAt.Valid {
		cv.ArchivedAt = &archivedAt.Time
	}
	if withUser {
		cv.Edges.User = &ent.User{ID: int(userID.Int64), Name: userName.String, Department: department.String}
	}
	if withAgent {
		cv.Edges.Agent = &ent.Agent{ID: int(agentID.Int64), Name: agentName.String}
	}
	return &cv, nil
}

// dialectBuilder is the statement builder of the driver's dialect.
func (t *fastRead) builder() *entsql.DialectBuilder { return entsql.Dialect(t.drv.Dialect()) }

func (t *fastRead) loadTurns(ctx context.Context, convID int, p page, sel []selField) error {
	b := t.builder()
	var r turnRow
	c := t.newColumns(b, turn.Table)
	c.add(true, turn.FieldID, &r.id)
	c.add(true, turn.FieldNumber, &r.number)
	for _, f := range sel {
		switch f.name {
		case "status":
			c.add(true, turn.FieldStatus, &r.status)
		case "startedAt":
			c.addTime(true, turn.FieldStartedAt, &r.startedAt)
		case "finishedAt":
			c.addTime(true, turn.FieldFinishedAt, &r.finishedAt)
		case "timeZone":
			c.add(true, turn.FieldTimeZone, &r.timeZone)
		case "userText":
			c.add(true, turn.FieldUserText, &r.userText)
		case "answer":
			c.add(true, turn.FieldAnswer, &r.answer)
		case "error":
			c.add(true, turn.FieldError, &r.errText)
		case "replayed":
			c.add(true, turn.FieldReplayed, &r.replayed)
		case "superseded":
			c.add(true, turn.FieldSuperseded, &r.superseded)
		}
	}
	sel0 := b.Select(c.names...).From(c.table).Where(entsql.EQ(c.table.C(turn.FieldConversationID), convID))
	s, err := scoped(ctx, turn.Policy, sel0)
	if err != nil {
		return err
	}
	// As ent's pager reads a page: backward, both directions reversed,
	// and the page turned round after.
	numberDir, idDir := entgql.OrderDirectionAsc, entgql.OrderDirectionAsc
	if p.desc {
		numberDir = entgql.OrderDirectionDesc
	}
	if p.last {
		numberDir, idDir = numberDir.Reverse(), idDir.Reverse()
	}
	if p.after != nil || p.before != nil {
		preds, err := entgql.MultiCursorsPredicate(p.after, p.before, &entgql.MultiCursorsOptions{
			FieldID: turn.FieldID, DirectionID: idDir,
			Fields: []string{turn.FieldNumber}, Directions: []entgql.OrderDirection{numberDir},
		})
		if err != nil {
			return err
		}
		for _, pr := range preds {
			pr(s)
		}
	}
	order := func(column string, d entgql.OrderDirection) string {
		if d == entgql.OrderDirectionDesc {
			return entsql.Desc(column)
		}
		return column
	}
	s.OrderBy(order(c.table.C(turn.FieldNumber), numberDir), order(c.table.C(turn.FieldID), idDir)).Limit(p.limit + 1)
	err = t.query(ctx, s, &c, func() error {
		t.turns = append(t.turns, r)
		t.size += 256 + len(r.userText) + len(r.answer.String) + len(r.errText.String)
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

// inPage selects the rows whose column names a turn of the page read. On
// PostgreSQL it is one array of the turns' ids (column = ANY($1)), which
// plans as one index scan; on SQLite, the page's range of numbers, unique
// in a conversation, so the statement keeps three arguments and one text
// (and one prepared statement) whatever the page's length.
func (t *fastRead) inPage(column string) *entsql.Predicate {
	if t.drv.Dialect() == dialect.Postgres {
		return anyOf(column, t.turnIDs) // read only: the model calls and tool calls are read at once
	}
	tt := entsql.Table(turn.Table)
	return entsql.In(column, entsql.Select(tt.C(turn.FieldID)).From(tt).Where(entsql.And(
		entsql.EQ(tt.C(turn.FieldConversationID), t.conv.ID),
		entsql.GTE(tt.C(turn.FieldNumber), t.lo),
		entsql.LTE(tt.C(turn.FieldNumber), t.hi),
	)))
}

func (t *fastRead) loadToolCalls(ctx context.Context, sel []selField) error {
	b := t.builder()
	var (
		r        toolCallRow
		failures sql.RawBytes
	)
	c := t.newColumns(b, toolcall.Table)
	c.add(true, toolcall.FieldTurnID, &r.turnID)
	var result *selField
	for i, f := range sel {
		switch f.name {
		case "id":
			c.add(true, toolcall.FieldID, &r.id)
		case "position":
			c.add(true, toolcall.FieldPosition, &r.position)
		case "name":
			c.add(true, toolcall.FieldName, &r.name)
		case "arguments":
			c.add(true, toolcall.FieldArguments, &r.arguments)
		case "outcome":
			c.add(true, toolcall.FieldOutcome, &r.outcome)
		case "attempts":
			c.add(true, toolcall.FieldAttempts, &r.attempts)
		case "message":
			c.add(true, toolcall.FieldMessage, &r.message)
		case "ref":
			c.add(true, toolcall.FieldRef, &r.ref)
		case "guardrail":
			c.add(true, toolcall.FieldGuardrail, &r.guardrail)
		case "argumentsRef":
			c.add(true, toolcall.FieldArgumentsRef, &r.argsRef)
		case "startedAt":
			c.addTime(true, toolcall.FieldStartedAt, &r.startedAt)
		case "finishedAt":
			c.addTime(true, toolcall.FieldFinishedAt, &r.finishedAt)
		case "failures":
			c.add(true, toolcall.FieldFailures, &failures)
		case "result":
			c.add(true, toolcall.FieldResultID, &r.resultID)
			result = &sel[i]
		}
	}
	s, err := scoped(ctx, toolcall.Policy, b.Select(c.names...).From(c.table).
		Where(t.inPage(c.table.C(toolcall.FieldTurnID))))
	if err != nil {
		return err
	}
	s.OrderBy(c.table.C(toolcall.FieldTurnID), c.table.C(toolcall.FieldPosition))
	t.resultIDs = t.resultIDs[:0]
	err = t.query(ctx, s, &c, func() error {
		r.failures = nil
		if len(failures) > 0 && string(failures) != "null" && string(failures) != "[]" {
			if err := json.Unmarshal(failures, &r.failures); err != nil {
				return fmt.Errorf("decode failures: %w", err)
			}
		}
		extend(t.toolSpans, r.turnID, len(t.toolCalls))
		t.toolCalls = append(t.toolCalls, r)
		t.size += 192 + len(r.arguments) + len(r.message.String)
		if r.resultID.Valid {
			t.resultIDs = append(t.resultIDs, r.resultID.Int64)
		}
		return nil
	})
	if err != nil || result == nil || len(t.resultIDs) == 0 {
		return err
	}
	return t.loadResults(ctx, result.kids)
}

// resultsRead selects the results of the tool calls read: on PostgreSQL
// by one array of their ids, planned and run in a third of the time a
// subquery through the tool calls takes there; on SQLite by that subquery.
func (t *fastRead) resultsRead(results *entsql.SelectTable) *entsql.Predicate {
	if t.drv.Dialect() == dialect.Postgres {
		return anyOf(results.C(storedresult.FieldID), t.resultIDs)
	}
	tc := entsql.Table(toolcall.Table)
	return entsql.In(results.C(storedresult.FieldID),
		entsql.Select(tc.C(toolcall.FieldResultID)).From(tc).Where(t.inPage(tc.C(toolcall.FieldTurnID))))
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

func (t *fastRead) loadResults(ctx context.Context, sel []selField) error {
	b := t.builder()
	var r resultRow
	c := t.newColumns(b, storedresult.Table)
	c.add(true, storedresult.FieldID, &r.id)
	for _, f := range sel {
		switch f.name {
		case "ref":
			c.add(true, storedresult.FieldRef, &r.ref)
		case "kind":
			c.add(true, storedresult.FieldKind, &r.kind)
		case "chars":
			c.add(true, storedresult.FieldChars, &r.chars)
		case "bytes":
			c.add(true, storedresult.FieldBytes, &r.bytes)
		case "items":
			c.add(true, storedresult.FieldItems, &r.items)
		case "truncatedAtSource":
			c.add(true, storedresult.FieldTruncatedAtSource, &r.truncatedAtSource)
		case "createdAt":
			c.addTime(true, storedresult.FieldCreatedAt, &r.createdAt)
		case "updatedAt":
			c.addTime(true, storedresult.FieldUpdatedAt, &r.updatedAt)
		}
	}
	s, err := scoped(ctx, storedresult.Policy, b.Select(c.names...).From(c.table).Where(t.resultsRead(c.table)))
	if err != nil {
		return err
	}
	return t.query(ctx, s, &c, func() error {
		t.resultAt[r.id] = len(t.results)
		t.results = append(t.results, r)
		t.size += 160 + len(r.ref)
		return nil
	})
}

func (t *fastRead) loadModelCalls(ctx context.Context, sel []selField, stats bool) error {
	b := t.builder()
	var r modelCallRow
	c := t.newColumns(b, modelcall.Table)
	c.add(true, modelcall.FieldTurnID, &r.turnID)
	want := map[string]bool{}
	for _, f := range sel {
		want[f.name] = true
	}
	c.add(want["step"], modelcall.FieldStep, &r.step)
	c.add(want["kind"], modelcall.FieldKind, &r.kind)
	c.add(want["model"], modelcall.FieldModel, &r.model)
	c.add(want["text"], modelcall.FieldText, &r.text)
	c.add(want["provider"], modelcall.FieldProvider, &r.provider)
	c.addTime(want["startedAt"], modelcall.FieldStartedAt, &r.startedAt)
	c.add(want["durationMs"], modelcall.FieldDurationMs, &r.durationMs)
	c.add(want["inputTokens"] || stats, modelcall.FieldInputTokens, &r.inputTokens)
	c.add(want["cacheReadTokens"] || stats, modelcall.FieldCacheReadTokens, &r.cacheReadTokens)
	c.add(want["cacheWriteTokens"] || stats, modelcall.FieldCacheWriteTokens, &r.cacheWriteTokens)
	c.add(want["outputTokens"], modelcall.FieldOutputTokens, &r.outputTokens)
	c.add(want["prefixTokens"] || stats, modelcall.FieldPrefixTokens, &r.prefixTokens)
	c.add(want["costAmount"], modelcall.FieldCostMicros, &r.costMicros)
	s, err := scoped(ctx, modelcall.Policy, b.Select(c.names...).From(c.table).
		Where(t.inPage(c.table.C(modelcall.FieldTurnID))))
	if err != nil {
		return err
	}
	s.OrderBy(c.table.C(modelcall.FieldTurnID), c.table.C(modelcall.FieldStep))
	return t.query(ctx, s, &c, func() error {
		extend(t.modelSpans, r.turnID, len(t.modelCalls))
		t.modelCalls = append(t.modelCalls, r)
		return nil
	})
}

// The writers below append a type's selected fields as gqlgen writes them:
// keys in selection order, each value through the encoder gqlgen's own
// marshaller for that scalar uses.

func (t *fastRead) conversation(b []byte, sel []selField) []byte {
	c := t.conv
	b = append(b, '{')
	for i, f := range sel {
		b = key(b, i, f.alias)
		switch f.name {
		case "id":
			b = appendID(b, c.ID)
		case "title":
			b = appendStringPtr(b, c.Title)
		case "createdAt":
			b = appendTime(b, c.CreatedAt)
		case "updatedAt":
			b = appendTime(b, c.UpdatedAt)
		case "archivedAt":
			if c.ArchivedAt == nil {
				b = append(b, "null"...)
			} else {
				b = appendTime(b, *c.ArchivedAt)
			}
		case "turnsCount":
			b = strconv.AppendInt(b, int64(c.TurnsCount), 10)
		case "user":
			b = appendObject(b, f.kids, func(b []byte, f selField) []byte {
				switch f.name {
				case "id":
					return appendID(b, c.Edges.User.ID)
				case "name":
					return appendString(b, c.Edges.User.Name)
				case "department":
					return appendString(b, c.Edges.User.Department)
				}
				return appendString(b, "User")
			})
		case "agent":
			b = appendObject(b, f.kids, func(b []byte, f selField) []byte {
				switch f.name {
				case "id":
					return appendID(b, c.Edges.Agent.ID)
				case "name":
					return appendString(b, c.Edges.Agent.Name)
				}
				return appendString(b, "Agent")
			})
		case "turns":
			b = t.connection(b, f.kids)
		case "__typename":
			b = appendString(b, "Conversation")
		}
	}
	return append(b, '}')
}

func (t *fastRead) connection(b []byte, sel []selField) []byte {
	cursor := func(b []byte, tu *turnRow) []byte {
		return t.appendMarshaler(b, entgql.Cursor[int]{ID: int(tu.id), Value: []any{int(tu.number)}})
	}
	return appendObject(b, sel, func(b []byte, f selField) []byte {
		switch f.name {
		case "pageInfo":
			return appendObject(b, f.kids, func(b []byte, f selField) []byte {
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
				b = appendObject(b, f.kids, func(b []byte, f selField) []byte {
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
	return appendObject(b, sel, func(b []byte, f selField) []byte {
		switch f.name {
		case "id":
			return appendID(b, int(tu.id))
		case "number":
			return strconv.AppendInt(b, tu.number, 10)
		case "status":
			return appendEnum(b, tu.status)
		case "startedAt":
			return appendNullTime(b, tu.startedAt)
		case "finishedAt":
			return appendNullTime(b, tu.finishedAt)
		case "timeZone":
			return appendString(b, tu.timeZone)
		case "userText":
			return appendString(b, tu.userText)
		case "answer":
			return appendNullString(b, tu.answer)
		case "error":
			return appendNullString(b, tu.errText)
		case "replayed":
			return strconv.AppendBool(b, tu.replayed)
		case "superseded":
			return strconv.AppendBool(b, tu.superseded)
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
			return appendObject(b, f.kids, func(b []byte, f selField) []byte {
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
				b = modelCallJSON(b, &calls[i], f.kids)
			}
			return append(b, ']')
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
		return appendString(b, "Turn")
	})
}

// turnModelCalls are the model calls of turn id.
func (t *fastRead) turnModelCalls(id int64) []modelCallRow {
	sp := t.modelSpans[id]
	return t.modelCalls[sp.lo:sp.hi]
}

func modelCallJSON(b []byte, m *modelCallRow, sel []selField) []byte {
	return appendObject(b, sel, func(b []byte, f selField) []byte {
		switch f.name {
		case "step":
			return strconv.AppendInt(b, m.step, 10)
		case "kind":
			return appendEnum(b, m.kind)
		case "model":
			return appendString(b, m.model)
		case "text":
			return appendString(b, m.text)
		case "provider":
			return appendString(b, m.provider)
		case "startedAt":
			return appendNullTime(b, m.startedAt)
		case "durationMs":
			return strconv.AppendInt(b, m.durationMs, 10)
		case "inputTokens":
			return strconv.AppendInt(b, m.inputTokens, 10)
		case "cacheReadTokens":
			return strconv.AppendInt(b, m.cacheReadTokens, 10)
		case "cacheWriteTokens":
			return strconv.AppendInt(b, m.cacheWriteTokens, 10)
		case "outputTokens":
			return strconv.AppendInt(b, m.outputTokens, 10)
		case "prefixTokens":
			return strconv.AppendInt(b, m.prefixTokens, 10)
		case "costAmount":
			return appendObject(b, f.kids, func(b []byte, f selField) []byte {
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
		}
		return appendString(b, "ModelCall")
	})
}

func (t *fastRead) toolCall(b []byte, c *toolCallRow, sel []selField) []byte {
	return appendObject(b, sel, func(b []byte, f selField) []byte {
		switch f.name {
		case "id":
			return appendID(b, int(c.id))
		case "position":
			return strconv.AppendInt(b, c.position, 10)
		case "name":
			return appendString(b, c.name)
		case "arguments":
			return appendString(b, c.arguments)
		case "outcome":
			return appendEnum(b, c.outcome)
		case "attempts":
			return strconv.AppendInt(b, c.attempts, 10)
		case "message":
			return appendNullString(b, c.message)
		case "ref":
			return appendNullString(b, c.ref)
		case "guardrail":
			return appendNullString(b, c.guardrail)
		case "argumentsRef":
			return appendNullString(b, c.argsRef)
		case "startedAt":
			return appendNullTime(b, c.startedAt)
		case "finishedAt":
			return appendNullTime(b, c.finishedAt)
		case "failures":
			b = append(b, '[')
			for i := range c.failures {
				if i > 0 {
					b = append(b, ',')
				}
				it := &c.failures[i]
				b = appendObject(b, f.kids, func(b []byte, f selField) []byte {
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
			at, found := t.resultAt[c.resultID.Int64]
			if !c.resultID.Valid || !found {
				return append(b, "null"...)
			}
			r := &t.results[at]
			return appendObject(b, f.kids, func(b []byte, f selField) []byte {
				switch f.name {
				case "id":
					return appendID(b, int(r.id))
				case "ref":
					return appendString(b, r.ref)
				case "kind":
					return appendEnum(b, r.kind)
				case "chars":
					return strconv.AppendInt(b, r.chars, 10)
				case "bytes":
					return strconv.AppendInt(b, r.bytes, 10)
				case "items":
					return strconv.AppendInt(b, r.items, 10)
				case "truncatedAtSource":
					return strconv.AppendBool(b, r.truncatedAtSource)
				case "createdAt":
					return appendNullTime(b, r.createdAt)
				case "updatedAt":
					return appendNullTime(b, r.updatedAt)
				}
				return appendString(b, "StoredResult")
			})
		}
		return appendString(b, "ToolCall")
	})
}

// appendObject writes an object of the selected fields, each value by
// value (which writes __typename for a name it does not know).
func appendObject(b []byte, sel []selField, value func([]byte, selField) []byte) []byte {
	b = append(b, '{')
	for i, f := range sel {
		b = key(b, i, f.alias)
		b = value(b, f)
	}
	return append(b, '}')
}

func key(b []byte, i int, alias string) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = appendString(b, alias)
	return append(b, ':')
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

func appendNullTime(b []byte, v sql.NullTime) []byte {
	if !v.Valid {
		return append(b, "null"...)
	}
	return appendTime(b, v.Time)
}

func appendNullString(b []byte, s sql.NullString) []byte {
	if !s.Valid {
		return append(b, "null"...)
	}
	return appendString(b, s.String)
}

// appendEnum writes an enum's value as its MarshalGQL does (ent's enums,
// schematype's kinds): quoted by strconv.Quote.
func appendEnum(b []byte, v string) []byte { return strconv.AppendQuote(b, v) }

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

const hexDigits = "0123456789ABCDEF"

// appendString quotes s as gqlgen's MarshalString does: only control
// characters, backslash and the double quote are escaped, and bytes that
// are not UTF-8 are written as they are.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '\\' && c != '"' {
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
// but those named in resolvedFields (TestTranscriptFieldsServed).
var transcriptTypes = []string{"Conversation", "Turn", "ModelCall", "ToolCall", "StoredResult"}

// resolvedFields are the transcript types' fields the hot path leaves to
// their resolvers: a selection naming any is answered by them whole.
var resolvedFields = map[string][]string{
	// Lists of their own, each its own read (tasks from the workspace,
	// summaries and attachments by their own loaders).
	"Conversation": {"tasks", "summaries", "attachments"},
	// suggestions and clarification are JSON a resolver decodes and
	// checks; grounding merges spans across the turn's results; the
	// conversation goes back up the graph; the pending approvals and the
	// ratings are rows of their own (the caller's rating depends on who
	// asks).
	"Turn": {"suggestions", "clarification", "conversation", "grounding", "pendingApprovals", "myRating", "ratings"},
	// attribution is shown to admins only (a resolver with side logic);
	// cost is the deprecated float.
	"ModelCall": {"cost", "attribution"},
	// evidence and repairs are JSON columns a resolver reads only when
	// asked; turn goes back up the graph; approval is a row of its own.
	"ToolCall": {"evidence", "repairs", "turn", "approval"},
}
