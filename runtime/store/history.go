package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/pgtext"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/summary"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/runtime/prompt"
)

// Past is what the history is built from: the summaries that stand for
// the oldest turns (prompt.Chain), the earlier turns after them, the model
// calls and tool calls of those turns and of this one, grouped by turn and
// step, and the sizes of the results the calls stored, by ref.
type Past struct {
	Chain []prompt.Summary
	Turns []*ent.Turn
	Steps map[int][]prompt.Step
	Sizes map[string]int64
}

// Of is the turn a history is read for: its id and number, its
// conversation and the conversation's organisation.
type Of struct{ Conversation, Number, Turn, Organization int }

// Row kinds of ReadPast's statement, in the order its rows come.
const (
	pastSummary = iota
	pastTurn
	pastModelCall
	pastToolCall
)

// ReadPast reads the history in one statement: ent would send one for the
// summaries, one for the turns after them, one each for their model calls,
// tool calls and what the recent turns' calls were heard as, and one for
// the results' sizes. Each part is limited as its own read was: the
// summaries and turns to the conversation, the calls to its turns after
// the summaries and to this one, the model calls also to the organisation,
// the results to the conversation. What the model heard is read only for
// the turns that replay it, the last few and this one; older calls replay
// their outcome and ref.
func (s *Store) ReadPast(ctx context.Context, of Of) (*Past, error) {
	d := s.dialect
	sqlite := d == dialect.SQLite
	query, args, err := pastStatement(d, pastValues{of.Conversation, of.Number, of.Turn, of.Organization})
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	rows, err := s.client.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	defer rows.Close()
	var (
		kind, key1, key2 sql.NullInt64
		ints             [nInts]sql.NullInt64
		texts            [nTexts]sql.NullString
		jsons            [nJSON][]byte
		times            [nTimes]sql.NullTime
		timeTexts        [nTimes]sql.NullString
	)
	dests := []any{&kind, &key1, &key2}
	for i := range ints {
		dests = append(dests, &ints[i])
	}
	for i := range texts {
		dests = append(dests, &texts[i])
	}
	for i := range jsons {
		dests = append(dests, &jsons[i])
	}
	for i := range times {
		if sqlite {
			dests = append(dests, &timeTexts[i])
		} else {
			dests = append(dests, &times[i])
		}
	}
	text := func(i int) string { return pgtext.Read(d, texts[i].String) }
	textPtr := func(i int) *string {
		if !texts[i].Valid {
			return nil
		}
		s := text(i)
		return &s
	}
	var all []prompt.Summary
	out := &Past{Steps: map[int][]prompt.Step{}, Sizes: map[string]int64{}}
	at := func(turnID, step int) *prompt.Step {
		for len(out.Steps[turnID]) <= step {
			out.Steps[turnID] = append(out.Steps[turnID], prompt.Step{})
		}
		return &out.Steps[turnID][step]
	}
	for rows.Next() {
		for i := range jsons {
			jsons[i] = nil
		}
		if err := rows.Scan(dests...); err != nil {
			return nil, fmt.Errorf("load history: %w", err)
		}
		if sqlite {
			for i, tt := range timeTexts {
				times[i] = sql.NullTime{}
				if !tt.Valid {
					continue
				}
				v, err := time.ParseInLocation(db.SQLiteTime, tt.String, time.UTC)
				if err != nil {
					return nil, fmt.Errorf("load history: read time: %w", err)
				}
				times[i] = sql.NullTime{Time: v.UTC(), Valid: true}
			}
		}
		switch kind.Int64 {
		case pastSummary:
			all = append(all, prompt.Summary{From: int(key2.Int64), To: int(key1.Int64), Text: text(0)})
		case pastTurn:
			out.Turns = append(out.Turns, &ent.Turn{ID: int(key2.Int64), Number: int(key1.Int64), StartedAt: times[0].Time,
				TimeZone: text(3), UserText: text(0), Answer: textPtr(1), Status: turn.Status(text(2))})
		case pastModelCall:
			at(int(key1.Int64), int(key2.Int64)).Text = text(0)
		case pastToolCall:
			c := &ent.ToolCall{ID: int(ints[0].Int64), TurnID: int(key1.Int64), Position: int(key2.Int64), Step: int(ints[1].Int64),
				CallID: text(0), Name: text(1), Arguments: text(2), Outcome: schematype.Outcome(text(3)), Attempts: int(ints[2].Int64),
				Message: textPtr(4), Heard: textPtr(5), Ref: textPtr(6), Guardrail: textPtr(7), ArgumentsRef: textPtr(8),
				StartedAt: times[0].Time}
			if ints[3].Valid {
				id := int(ints[3].Int64)
				c.ResultID = &id
			}
			if times[1].Valid {
				f := times[1].Time
				c.FinishedAt = &f
			}
			for i, p := range []any{&c.Failures, &c.Evidence, &c.Repairs} {
				if len(jsons[i]) == 0 {
					continue
				}
				if err := json.Unmarshal(jsons[i], p); err != nil {
					return nil, fmt.Errorf("load history: %w", err)
				}
			}
			if texts[9].Valid {
				out.Sizes[text(9)] = ints[4].Int64
			}
			st := at(c.TurnID, c.Step)
			st.Calls = append(st.Calls, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	out.Chain = prompt.Chain(all)
	return out, nil
}

// pastValues are the values ReadPast's statement is for.
type pastValues struct{ conversation, number, turn, organization int }

// pastStatements caches ReadPast's statement by dialect: it is built once,
// for sentinel values, and each read puts its own values in their places.
var pastStatements sync.Map // dialect -> *cachedPast

type cachedPast struct {
	query string
	args  []any
	// values maps each argument to its value in pastValues (by the
	// sentinel it was built with), or -1 for a constant.
	values []int
}

// pastSentinels are values no row has, each its own.
var pastSentinels = pastValues{-7_000_001, -7_000_002, -7_000_003, -7_000_004}

// pastStatement returns ReadPast's statement and arguments for v.
func pastStatement(d string, v pastValues) (string, []any, error) {
	c, ok := pastStatements.Load(d)
	if !ok {
		query, args, err := buildPast(d, pastSentinels)
		if err != nil {
			return "", nil, err
		}
		ps := &cachedPast{query: query, args: args, values: make([]int, len(args))}
		sentinels := []int{pastSentinels.conversation, pastSentinels.number, pastSentinels.turn, pastSentinels.organization}
		for i, a := range args {
			ps.values[i] = -1
			if n, isInt := a.(int); isInt {
				ps.values[i] = slices.Index(sentinels, n)
			}
		}
		c, _ = pastStatements.LoadOrStore(d, ps)
	}
	ps := c.(*cachedPast)
	vals := []int{v.conversation, v.number, v.turn, v.organization}
	args := slices.Clone(ps.args)
	for i, k := range ps.values {
		if k >= 0 {
			args[i] = vals[k]
		}
	}
	return ps.query, args, nil
}

// buildPast builds ReadPast's statement for v.
func buildPast(d string, v pastValues) (string, []any, error) {
	b := entsql.Dialect(d)
	convID, number := v.conversation, v.number
	sqlite := d == dialect.SQLite
	// when reads a time column: on SQLite as text, as a column of a union
	// has no declared type for the driver to parse it by (parsed after).
	when := func(c string) string {
		if sqlite {
			return "CAST(" + c + " AS TEXT)"
		}
		return c
	}

	// The earlier turns replayed: after the last summary, before this one.
	after := func() *entsql.Selector {
		st := b.Table(summary.Table).As("s0")
		return b.Select("COALESCE(MAX(" + st.C(summary.FieldToTurn) + "), 0)").From(st).
			Where(entsql.And(entsql.EQ(st.C(summary.FieldConversationID), convID), entsql.LT(st.C(summary.FieldToTurn), number)))
	}
	upTo := func(column string, this bool) *entsql.Predicate {
		if this {
			return entsql.LTE(column, number)
		}
		return entsql.LT(column, number)
	}
	var since func(as string, this bool, columns ...string) (*entsql.Selector, *entsql.SelectTable)
	earlier := func(as string, columns ...string) (*entsql.Selector, *entsql.SelectTable) {
		return since(as, false, columns...)
	}
	// since is earlier, with this turn too when this is true.
	since = func(as string, this bool, columns ...string) (*entsql.Selector, *entsql.SelectTable) {
		tt := b.Table(turn.Table).As(as)
		cs := make([]string, len(columns))
		for i, c := range columns {
			cs[i] = tt.C(c)
		}
		return b.Select(cs...).From(tt).Where(entsql.And(
			entsql.EQ(tt.C(turn.FieldConversationID), convID),
			// A turn answered again (regenerateTurn) is not replayed: the
			// model hears its question once, in the turn that replaced it.
			entsql.EQ(tt.C(turn.FieldSuperseded), false),
			entsql.P(func(bb *entsql.Builder) {
				bb.WriteString(tt.C(turn.FieldNumber)).WriteString(" > ").Wrap(func(bb *entsql.Builder) { bb.Join(after()) })
			}),
			upTo(tt.C(turn.FieldNumber), this))), tt
	}
	// ofTurns limits a call's rows to the earlier turns' and this one's:
	// one IN over the conversation's turns by number, which both planners
	// join by the calls' turn_id index (an OR with this turn's id, beside
	// it, made PostgreSQL's read every row of the table).
	ofTurns := func(column string) *entsql.Predicate {
		ids, _ := since("h0", true, turn.FieldID)
		return entsql.In(column, ids)
	}

	row := func(kind int, key1, key2 string, ints, texts, jsons, times []string) []string {
		out := []string{strconv.Itoa(kind), key1, key2}
		for i := range nInts {
			out = append(out, slot(ints, i))
		}
		for i := range nTexts {
			out = append(out, slot(texts, i))
		}
		for i := range nJSON {
			out = append(out, slot(jsons, i))
		}
		for i := range nTimes {
			out = append(out, slot(times, i))
		}
		return out
	}
	selectRow := func(columns []string) *entsql.Selector {
		s := b.Select()
		for _, c := range columns {
			s.AppendSelectExpr(entsql.Expr(c))
		}
		return s
	}

	// Summaries, by the turn they end with.
	ss := b.Table(summary.Table).As("s1")
	sums := selectRow(row(pastSummary, ss.C(summary.FieldToTurn), ss.C(summary.FieldFromTurn), nil,
		[]string{ss.C(summary.FieldText)}, nil, nil)).From(ss).
		Where(entsql.And(entsql.EQ(ss.C(summary.FieldConversationID), convID), entsql.LT(ss.C(summary.FieldToTurn), number)))

	// The earlier turns, by number.
	turns, tt := earlier("t1")
	for _, c := range row(pastTurn, tt.C(turn.FieldNumber), tt.C(turn.FieldID), nil,
		[]string{tt.C(turn.FieldUserText), tt.C(turn.FieldAnswer), tt.C(turn.FieldStatus), tt.C(turn.FieldTimeZone)},
		nil, []string{when(tt.C(turn.FieldStartedAt))}) {
		turns.AppendSelectExpr(entsql.Expr(c))
	}

	// Their steps' model calls, by turn and step.
	mt := b.Table(modelcall.Table).As("m1")
	mcs := selectRow(row(pastModelCall, mt.C(modelcall.FieldTurnID), mt.C(modelcall.FieldStep), nil,
		[]string{mt.C(modelcall.FieldText)}, nil, nil)).From(mt).
		Where(entsql.And(ofTurns(mt.C(modelcall.FieldTurnID)),
			// Unary plus: the organisation checked, by no index. By its
			// (organization_id, started_at) index both databases' planners
			// read every model call the organisation ever made; by turn_id,
			// only these turns'.
			entsql.P(func(bb *entsql.Builder) {
				bb.WriteString("+" + mt.C(modelcall.FieldOrganizationID) + " = ").Arg(v.organization)
			}),
			entsql.EQ(mt.C(modelcall.FieldKind), modelcall.KindSTEP.String())))

	// Their tool calls, by turn and position, with their results' sizes.
	ct := b.Table(toolcall.Table).As("c1")
	rt := b.Table(storedresult.Table).As("r1")
	recent, ht := earlier("h1", turn.FieldID)
	recent.OrderBy(entsql.Desc(ht.C(turn.FieldNumber))).Limit(prompt.RecentTurns)
	heard := entsql.ExprFunc(func(bb *entsql.Builder) {
		bb.WriteString("CASE WHEN ").Join(entsql.Or(entsql.EQ(ct.C(toolcall.FieldTurnID), v.turn),
			entsql.In(ct.C(toolcall.FieldTurnID), recent))).
			WriteString(" THEN ").WriteString(ct.C(toolcall.FieldHeard)).WriteString(" END")
	})
	calls := b.Select()
	for i, c := range row(pastToolCall, ct.C(toolcall.FieldTurnID), ct.C(toolcall.FieldPosition),
		[]string{ct.C(toolcall.FieldID), ct.C(toolcall.FieldStep), ct.C(toolcall.FieldAttempts), ct.C(toolcall.FieldResultID), rt.C(storedresult.FieldChars)},
		[]string{ct.C(toolcall.FieldCallID), ct.C(toolcall.FieldName), ct.C(toolcall.FieldArguments), ct.C(toolcall.FieldOutcome),
			ct.C(toolcall.FieldMessage), "", ct.C(toolcall.FieldRef), ct.C(toolcall.FieldGuardrail), ct.C(toolcall.FieldArgumentsRef),
			rt.C(storedresult.FieldRef)},
		[]string{ct.C(toolcall.FieldFailures), ct.C(toolcall.FieldEvidence), ct.C(toolcall.FieldRepairs)},
		[]string{when(ct.C(toolcall.FieldStartedAt)), when(ct.C(toolcall.FieldFinishedAt))}) {
		if i == heardSlot {
			calls.AppendSelectExpr(heard)
			continue
		}
		calls.AppendSelectExpr(entsql.Expr(c))
	}
	calls.From(ct).LeftJoin(rt).On(rt.C(storedresult.FieldID), ct.C(toolcall.FieldResultID)).
		OnP(entsql.EQ(rt.C(storedresult.FieldConversationID), convID)).
		Where(ofTurns(ct.C(toolcall.FieldTurnID)))

	// The tool calls come first: the columns of a union take their types
	// from its first part on PostgreSQL, and theirs fill every slot.
	q := calls.UnionAll(sums).UnionAll(turns).UnionAll(mcs).OrderExpr(entsql.Expr("1, 2, 3"))
	query, args := q.Query()
	return query, args, q.Err()
}

// The union's columns: a kind, two ordering keys, then the slots each kind
// fills; the others are NULL.
const (
	nInts  = 5 // id, step, attempts, result id, result chars
	nTexts = 10
	nJSON  = 3
	nTimes = 2
)

// heardSlot is the place of what a call was heard as among the union's
// columns: its kind and keys, the ints, then the texts' sixth.
const heardSlot = 3 + nInts + 5

// slot is the i-th of a kind's columns, or NULL.
func slot(columns []string, i int) string {
	if i < len(columns) && columns[i] != "" {
		return columns[i]
	}
	return "NULL"
}
