package graph

import (
	"context"
	"io"
	"strconv"
	"time"

	"entgo.io/contrib/entgql"
	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
)

// The transcript's hot path. A portal reads a conversation whole, a page
// of 100 turns with their model calls, tool calls and results' metadata:
// some 15,000 fields. Resolved field by field, gqlgen gives each its own
// context and marshaller, and that, not SQL, was most of the read's CPU
// and allocation. fastConversation answers such a read itself: it loads
// each level in one statement, through the same scoped client (so the same
// privacy rules), reading only the columns asked for, and writes the JSON
// straight into one buffer with the same encoders gqlgen uses, so the
// answer is the one the resolvers give, byte for byte
// (TestFastTranscriptMatchesResolvers).
//
// It takes a `conversation` field only when every field selected under it
// is one it knows and the turns page forward by number (first, after,
// orderBy NUMBER ASC); anything else, and any error, leaves the field to
// the resolvers, which then answer or refuse exactly as before.

// selField is a field of the selection, with its sub-selection.
type selField struct {
	alias, name string
	kids        []selField
	args        map[string]any
}

// fastTypes lists, per type the hot path writes, the fields it knows: a
// leaf ("") or the type of an object or list of objects.
var fastTypes = map[string]map[string]string{
	"Conversation":   {"id": "", "title": "", "createdAt": "", "turnsCount": "", "user": "User", "agent": "Agent", "turns": "TurnConnection", "__typename": ""},
	"User":           {"id": "", "name": "", "department": "", "__typename": ""},
	"Agent":          {"id": "", "name": "", "__typename": ""},
	"TurnConnection": {"pageInfo": "PageInfo", "edges": "TurnEdge", "__typename": ""},
	"PageInfo":       {"hasNextPage": "", "hasPreviousPage": "", "startCursor": "", "endCursor": "", "__typename": ""},
	"TurnEdge":       {"node": "Turn", "cursor": "", "__typename": ""},
	"Turn": {"id": "", "number": "", "status": "", "startedAt": "", "finishedAt": "", "timeZone": "", "userText": "", "answer": "",
		"error": "", "replayed": "", "promptStats": "PromptStats", "modelCalls": "ModelCall", "toolCalls": "ToolCall", "__typename": ""},
	"PromptStats": {"prefixTokens": "", "inputTokens": "", "cacheReadTokens": "", "modelCalls": "", "__typename": ""},
	"ModelCall": {"step": "", "kind": "", "model": "", "durationMs": "", "inputTokens": "", "cacheReadTokens": "", "cacheWriteTokens": "",
		"outputTokens": "", "prefixTokens": "", "costAmount": "Money", "__typename": ""},
	"Money": {"amount": "", "__typename": ""},
	"ToolCall": {"id": "", "position": "", "name": "", "arguments": "", "outcome": "", "attempts": "", "message": "", "ref": "",
		"guardrail": "", "argumentsRef": "", "startedAt": "", "finishedAt": "", "failures": "ItemFailure", "result": "StoredResult", "__typename": ""},
	"ItemFailure":  {"item": "", "input": "", "kind": "", "message": "", "__typename": ""},
	"StoredResult": {"id": "", "ref": "", "kind": "", "chars": "", "bytes": "", "items": "", "truncatedAtSource": "", "createdAt": "", "__typename": ""},
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
// conversation read itself (see above).
func fastConversation(client *ent.Client) graphql.RootFieldMiddleware {
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
		t, err := loadFast(ctx, client, id, sel)
		if err != nil || t == nil {
			return next(ctx)
		}
		return graphql.WriterFunc(func(w io.Writer) {
			b := make([]byte, 0, t.size)
			b = t.conversation(b, sel)
			_, _ = w.Write(b)
		})
	}
}

// fastRead is what the hot path loaded for one conversation.
type fastRead struct {
	conv        *ent.Conversation
	turns       []*ent.Turn
	hasNext     bool
	after       bool
	toolCalls   map[int][]*ent.ToolCall
	modelCalls  map[int][]*ent.ModelCall
	results     map[int]*ent.StoredResult
	size        int // a guess at the answer's length, to size its buffer once
	modelFields map[string]bool
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

// names returns the names selected in sel.
func names(sel []selField) map[string]bool {
	out := make(map[string]bool, len(sel))
	for _, f := range sel {
		out[f.name] = true
	}
	return out
}

// turnPage reads the turns field's arguments: it pages forward, by number
// ascending, or the hot path leaves it.
func turnPage(f *selField) (first int, after *entgql.Cursor[int], ok bool) {
	for k, v := range f.args {
		switch k {
		case "first":
			n, isInt := v.(int64)
			if !isInt || n < 0 || n > MaxPage {
				return 0, nil, false
			}
			first = int(n)
		case "after":
			if v == nil {
				continue
			}
			after = &entgql.Cursor[int]{}
			if after.UnmarshalGQL(v) != nil {
				return 0, nil, false
			}
		case "orderBy":
			list, isList := v.([]any)
			if !isList || len(list) != 1 {
				return 0, nil, false
			}
			o, isMap := list[0].(map[string]any)
			if !isMap || o["field"] != "NUMBER" || (o["direction"] != nil && o["direction"] != "ASC") {
				return 0, nil, false
			}
		default:
			if v != nil {
				return 0, nil, false
			}
		}
	}
	if _, hasFirst := f.args["first"]; !hasFirst {
		return 0, nil, false
	}
	if _, ordered := f.args["orderBy"]; !ordered {
		return 0, nil, false
	}
	return first, after, true
}

func loadFast(ctx context.Context, client *ent.Client, id int, sel []selField) (*fastRead, error) {
	t := &fastRead{size: 4 << 10}
	q := client.Conversation.Query().Where(conversation.ID(id))
	if f := find(sel, "user"); f != nil {
		q.WithUser()
	}
	if f := find(sel, "agent"); f != nil {
		q.WithAgent()
	}
	conv, err := q.Only(ctx)
	if err != nil {
		return nil, err
	}
	if find(sel, "user") != nil && conv.Edges.User == nil || find(sel, "agent") != nil && conv.Edges.Agent == nil {
		return nil, nil // out of reach: the resolvers say so
	}
	t.conv = conv
	turns := find(sel, "turns")
	if turns == nil {
		return t, nil
	}
	first, after, ok := turnPage(turns)
	if !ok {
		return nil, nil
	}
	t.after = after != nil
	var node []selField
	if e := find(turns.kids, "edges"); e != nil {
		if n := find(e.kids, "node"); n != nil {
			node = n.kids
		}
	}
	if first == 0 {
		return nil, nil // the resolvers count the turns for hasNextPage
	}
	want := names(node)
	cols := []string{turn.FieldID, turn.FieldNumber}
	for name, col := range map[string]string{"status": turn.FieldStatus, "startedAt": turn.FieldStartedAt, "finishedAt": turn.FieldFinishedAt,
		"timeZone": turn.FieldTimeZone, "userText": turn.FieldUserText, "answer": turn.FieldAnswer, "error": turn.FieldError, "replayed": turn.FieldReplayed} {
		if want[name] {
			cols = append(cols, col)
		}
	}
	tq := client.Turn.Query().Where(turn.ConversationID(conv.ID))
	if after != nil {
		preds, err := entgql.MultiCursorsPredicate(after, nil, &entgql.MultiCursorsOptions{
			FieldID: turn.FieldID, DirectionID: entgql.OrderDirectionAsc,
			Fields: []string{turn.FieldNumber}, Directions: []entgql.OrderDirection{entgql.OrderDirectionAsc},
		})
		if err != nil {
			return nil, err
		}
		for _, p := range preds {
			tq.Where(p)
		}
	}
	t.turns, err = tq.Order(turn.ByNumber(), turn.ByID()).Limit(first + 1).Select(cols...).All(ctx)
	if err != nil {
		return nil, err
	}
	if len(t.turns) > first {
		t.hasNext = true
		t.turns = t.turns[:first]
	}
	ids := make([]int, len(t.turns))
	for i, tu := range t.turns {
		ids[i] = tu.ID
		t.size += 256 + len(tu.UserText)
		if tu.Answer != nil {
			t.size += len(*tu.Answer)
		}
	}
	if len(ids) == 0 {
		return t, nil
	}
	if f := find(node, "toolCalls"); f != nil {
		if err := t.loadToolCalls(ctx, client, ids, f.kids); err != nil {
			return nil, err
		}
	}
	mc := find(node, "modelCalls")
	if mc != nil || want["promptStats"] {
		t.modelFields = map[string]bool{}
		if mc != nil {
			t.modelFields = names(mc.kids)
		}
		if err := t.loadModelCalls(ctx, client, ids, want["promptStats"]); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *fastRead) loadToolCalls(ctx context.Context, client *ent.Client, turnIDs []int, sel []selField) error {
	want := names(sel)
	cols := []string{toolcall.FieldID, toolcall.FieldTurnID, toolcall.FieldPosition}
	for name, col := range map[string]string{"name": toolcall.FieldName, "arguments": toolcall.FieldArguments, "outcome": toolcall.FieldOutcome,
		"attempts": toolcall.FieldAttempts, "message": toolcall.FieldMessage, "ref": toolcall.FieldRef, "guardrail": toolcall.FieldGuardrail,
		"argumentsRef": toolcall.FieldArgumentsRef, "startedAt": toolcall.FieldStartedAt, "finishedAt": toolcall.FieldFinishedAt,
		"failures": toolcall.FieldFailures, "result": toolcall.FieldResultID} {
		if want[name] {
			cols = append(cols, col)
		}
	}
	calls, err := client.ToolCall.Query().Where(toolcall.TurnIDIn(turnIDs...)).
		Order(ent.Asc(toolcall.FieldTurnID), ent.Asc(toolcall.FieldPosition)).Select(cols...).All(ctx)
	if err != nil {
		return err
	}
	t.toolCalls = make(map[int][]*ent.ToolCall, len(turnIDs))
	var resultIDs []int
	for _, c := range calls {
		t.toolCalls[c.TurnID] = append(t.toolCalls[c.TurnID], c)
		t.size += 192 + len(c.Arguments)
		if c.ResultID != nil {
			resultIDs = append(resultIDs, *c.ResultID)
		}
	}
	r := find(sel, "result")
	if r == nil || len(resultIDs) == 0 {
		return nil
	}
	rwant := names(r.kids)
	rcols := []string{storedresult.FieldID}
	for name, col := range map[string]string{"ref": storedresult.FieldRef, "kind": storedresult.FieldKind, "chars": storedresult.FieldChars,
		"bytes": storedresult.FieldBytes, "items": storedresult.FieldItems, "truncatedAtSource": storedresult.FieldTruncatedAtSource,
		"createdAt": storedresult.FieldCreatedAt} {
		if rwant[name] {
			rcols = append(rcols, col)
		}
	}
	rows, err := client.StoredResult.Query().Where(storedresult.IDIn(resultIDs...)).Select(rcols...).All(ctx)
	if err != nil {
		return err
	}
	t.results = make(map[int]*ent.StoredResult, len(rows))
	for _, row := range rows {
		t.results[row.ID] = row
		t.size += 160 + len(row.Ref)
	}
	return nil
}

func (t *fastRead) loadModelCalls(ctx context.Context, client *ent.Client, turnIDs []int, stats bool) error {
	want := t.modelFields
	cols := []string{modelcall.FieldID, modelcall.FieldTurnID, modelcall.FieldStep}
	for name, col := range map[string]string{"kind": modelcall.FieldKind, "model": modelcall.FieldModel, "durationMs": modelcall.FieldDurationMs,
		"inputTokens": modelcall.FieldInputTokens, "cacheReadTokens": modelcall.FieldCacheReadTokens, "cacheWriteTokens": modelcall.FieldCacheWriteTokens,
		"outputTokens": modelcall.FieldOutputTokens, "prefixTokens": modelcall.FieldPrefixTokens, "costAmount": modelcall.FieldCostMicros} {
		if want[name] {
			cols = append(cols, col)
		}
	}
	if stats {
		cols = append(cols, modelcall.FieldPrefixTokens, modelcall.FieldInputTokens, modelcall.FieldCacheReadTokens, modelcall.FieldCacheWriteTokens)
	}
	calls, err := client.ModelCall.Query().Where(modelcall.TurnIDIn(turnIDs...)).
		Order(ent.Asc(modelcall.FieldTurnID), ent.Asc(modelcall.FieldStep)).Select(dedupe(cols)...).All(ctx)
	if err != nil {
		return err
	}
	t.modelCalls = make(map[int][]*ent.ModelCall, len(turnIDs))
	for _, c := range calls {
		t.modelCalls[c.TurnID] = append(t.modelCalls[c.TurnID], c)
		t.size += 256
	}
	return nil
}

func dedupe(cols []string) []string {
	seen := make(map[string]bool, len(cols))
	out := cols[:0]
	for _, c := range cols {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
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
	cursor := func(b []byte, tu *ent.Turn) []byte {
		return appendMarshaler(b, entgql.Cursor[int]{ID: tu.ID, Value: []any{tu.Number}})
	}
	return appendObject(b, sel, func(b []byte, f selField) []byte {
		switch f.name {
		case "pageInfo":
			return appendObject(b, f.kids, func(b []byte, f selField) []byte {
				switch f.name {
				case "hasNextPage":
					return strconv.AppendBool(b, t.hasNext)
				case "hasPreviousPage":
					return strconv.AppendBool(b, t.after)
				case "startCursor", "endCursor":
					if len(t.turns) == 0 {
						return append(b, "null"...)
					}
					if f.name == "startCursor" {
						return cursor(b, t.turns[0])
					}
					return cursor(b, t.turns[len(t.turns)-1])
				}
				return appendString(b, "PageInfo")
			})
		case "edges":
			b = append(b, '[')
			for i, tu := range t.turns {
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

func (t *fastRead) turn(b []byte, tu *ent.Turn, sel []selField) []byte {
	return appendObject(b, sel, func(b []byte, f selField) []byte {
		switch f.name {
		case "id":
			return appendID(b, tu.ID)
		case "number":
			return strconv.AppendInt(b, int64(tu.Number), 10)
		case "status":
			return appendMarshaler(b, tu.Status)
		case "startedAt":
			return appendTime(b, tu.StartedAt)
		case "finishedAt":
			return appendTimePtr(b, tu.FinishedAt)
		case "timeZone":
			return appendString(b, tu.TimeZone)
		case "userText":
			return appendString(b, tu.UserText)
		case "answer":
			return appendStringPtr(b, tu.Answer)
		case "error":
			return appendStringPtr(b, tu.Error)
		case "replayed":
			return strconv.AppendBool(b, tu.Replayed)
		case "promptStats":
			s := promptStats(t.modelCalls[tu.ID])
			return appendObject(b, f.kids, func(b []byte, f selField) []byte {
				switch f.name {
				case "prefixTokens":
					return strconv.AppendInt(b, int64(s.PrefixTokens), 10)
				case "inputTokens":
					return strconv.AppendInt(b, int64(s.InputTokens), 10)
				case "cacheReadTokens":
					return strconv.AppendInt(b, int64(s.CacheReadTokens), 10)
				case "modelCalls":
					return strconv.AppendInt(b, int64(s.ModelCalls), 10)
				}
				return appendString(b, "PromptStats")
			})
		case "modelCalls":
			b = append(b, '[')
			for i, m := range t.modelCalls[tu.ID] {
				if i > 0 {
					b = append(b, ',')
				}
				b = modelCallJSON(b, m, f.kids)
			}
			return append(b, ']')
		case "toolCalls":
			b = append(b, '[')
			for i, c := range t.toolCalls[tu.ID] {
				if i > 0 {
					b = append(b, ',')
				}
				b = t.toolCall(b, c, f.kids)
			}
			return append(b, ']')
		}
		return appendString(b, "Turn")
	})
}

func modelCallJSON(b []byte, m *ent.ModelCall, sel []selField) []byte {
	return appendObject(b, sel, func(b []byte, f selField) []byte {
		switch f.name {
		case "step":
			return strconv.AppendInt(b, int64(m.Step), 10)
		case "kind":
			return appendMarshaler(b, m.Kind)
		case "model":
			return appendString(b, m.Model)
		case "durationMs":
			return strconv.AppendInt(b, m.DurationMs, 10)
		case "inputTokens":
			return strconv.AppendInt(b, m.InputTokens, 10)
		case "cacheReadTokens":
			return strconv.AppendInt(b, m.CacheReadTokens, 10)
		case "cacheWriteTokens":
			return strconv.AppendInt(b, m.CacheWriteTokens, 10)
		case "outputTokens":
			return strconv.AppendInt(b, m.OutputTokens, 10)
		case "prefixTokens":
			return strconv.AppendInt(b, m.PrefixTokens, 10)
		case "costAmount":
			return appendObject(b, f.kids, func(b []byte, f selField) []byte {
				if f.name == "amount" {
					return appendString(b, m.CostMicros.Amount())
				}
				return appendString(b, "Money")
			})
		}
		return appendString(b, "ModelCall")
	})
}

func (t *fastRead) toolCall(b []byte, c *ent.ToolCall, sel []selField) []byte {
	return appendObject(b, sel, func(b []byte, f selField) []byte {
		switch f.name {
		case "id":
			return appendID(b, c.ID)
		case "position":
			return strconv.AppendInt(b, int64(c.Position), 10)
		case "name":
			return appendString(b, c.Name)
		case "arguments":
			return appendString(b, c.Arguments)
		case "outcome":
			return appendMarshaler(b, c.Outcome)
		case "attempts":
			return strconv.AppendInt(b, int64(c.Attempts), 10)
		case "message":
			return appendStringPtr(b, c.Message)
		case "ref":
			return appendStringPtr(b, c.Ref)
		case "guardrail":
			return appendStringPtr(b, c.Guardrail)
		case "argumentsRef":
			return appendStringPtr(b, c.ArgumentsRef)
		case "startedAt":
			return appendTime(b, c.StartedAt)
		case "finishedAt":
			return appendTimePtr(b, c.FinishedAt)
		case "failures":
			b = append(b, '[')
			for i := range c.Failures {
				if i > 0 {
					b = append(b, ',')
				}
				it := &c.Failures[i]
				b = appendObject(b, f.kids, func(b []byte, f selField) []byte {
					switch f.name {
					case "item":
						return strconv.AppendInt(b, int64(it.Item), 10)
					case "input":
						return appendString(b, it.Input)
					case "kind":
						return appendMarshaler(b, it.Kind)
					case "message":
						return appendString(b, it.Message)
					}
					return appendString(b, "ItemFailure")
				})
			}
			return append(b, ']')
		case "result":
			if c.ResultID == nil || t.results[*c.ResultID] == nil {
				return append(b, "null"...)
			}
			r := t.results[*c.ResultID]
			return appendObject(b, f.kids, func(b []byte, f selField) []byte {
				switch f.name {
				case "id":
					return appendID(b, r.ID)
				case "ref":
					return appendString(b, r.Ref)
				case "kind":
					return appendMarshaler(b, r.Kind)
				case "chars":
					return strconv.AppendInt(b, r.Chars, 10)
				case "bytes":
					return strconv.AppendInt(b, r.Bytes, 10)
				case "items":
					return strconv.AppendInt(b, r.Items, 10)
				case "truncatedAtSource":
					return strconv.AppendBool(b, r.TruncatedAtSource)
				case "createdAt":
					return appendTime(b, r.CreatedAt)
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
	b = append(b, gid.Encode(id)...)
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

func appendTimePtr(b []byte, v *time.Time) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return appendTime(b, *v)
}

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

func appendMarshaler(b []byte, m graphql.Marshaler) []byte {
	w := byteWriter{b: b}
	m.MarshalGQL(&w)
	return w.b
}
