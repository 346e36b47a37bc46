// Package loader batches the nested lists of the transcript query into one
// SQL statement per level, whatever the number of parents. Loaders are made
// per response (the server installs them) and read with For(ctx).
//
// Batches do not depend on timing: the first tool-call list asked for in a
// page of turns loads the lists of every turn on that page at once, and
// primes the stored-result metadata of those calls, so the rest of the page
// is answered from the request's cache.
package loader

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/graph-gophers/dataloader/v7"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/task"
	"github.com/toolgate/toolgate/ent/toolcall"
)

// Wait is how long a loader gathers keys that arrive one by one (a turn
// reached through node(), say) before it queries.
const Wait = 2 * time.Millisecond

// Loaders are the per-request loaders.
type Loaders struct {
	client *ent.Client
	mu     sync.Mutex
	pages  map[int]*pageLoad // by the first turn id of the page

	// ToolCallsByTurn loads the tool calls of turns, ordered by position.
	ToolCallsByTurn *dataloader.Loader[int, []*ent.ToolCall]
	// ResultByID loads stored-result metadata, never the content.
	ResultByID *dataloader.Loader[int, *ent.StoredResult]
	// TasksByConversation loads conversations' task lists, in order.
	TasksByConversation *dataloader.Loader[int, []*ent.Task]
}

// New returns loaders that query through client (the API's scoped client).
func New(client *ent.Client) *Loaders {
	l := &Loaders{client: client, pages: map[int]*pageLoad{}}
	l.ResultByID = dataloader.NewBatchedLoader(l.resultByID(client),
		dataloader.WithWait[int, *ent.StoredResult](Wait))
	l.ToolCallsByTurn = dataloader.NewBatchedLoader(l.toolCallsByTurn(client),
		dataloader.WithWait[int, []*ent.ToolCall](Wait))
	l.TasksByConversation = dataloader.NewBatchedLoader(tasksByConversation(client),
		dataloader.WithWait[int, []*ent.Task](Wait))
	return l
}

type key struct{}

// With returns a context carrying l.
func With(ctx context.Context, l *Loaders) context.Context {
	return context.WithValue(ctx, key{}, l)
}

// For returns the request's loaders.
func For(ctx context.Context) *Loaders {
	return ctx.Value(key{}).(*Loaders)
}

type pageLoad struct {
	once sync.Once
	err  error
}

// ToolCalls returns the tool calls of turn. The first call for a page of
// turns loads the whole page in one statement and primes the cache; the
// siblings wait for it and read the cache, so the count of statements does
// not depend on how the resolvers are scheduled.
func (l *Loaders) ToolCalls(ctx context.Context, turn *ent.Turn) ([]*ent.ToolCall, error) {
	if ids := siblingTurns(ctx); len(ids) > 1 {
		l.mu.Lock()
		p, ok := l.pages[ids[0]]
		if !ok {
			p = &pageLoad{}
			l.pages[ids[0]] = p
		}
		l.mu.Unlock()
		p.once.Do(func() {
			for i, r := range l.toolCallsByTurn(l.client)(ctx, ids) {
				if r.Error != nil {
					p.err = r.Error
					return
				}
				l.ToolCallsByTurn.Prime(ctx, ids[i], r.Data)
			}
		})
		if p.err != nil {
			return nil, p.err
		}
	}
	return l.ToolCallsByTurn.Load(ctx, turn.ID)()
}

// siblingTurns returns the ids of the turns on the page a turn field is
// being resolved in, found on the enclosing connection or list.
func siblingTurns(ctx context.Context) []int {
	for fc := graphql.GetFieldContext(ctx); fc != nil; fc = fc.Parent {
		switch r := fc.Result.(type) {
		case *ent.TurnConnection:
			ids := make([]int, 0, len(r.Edges))
			for _, e := range r.Edges {
				if e != nil && e.Node != nil {
					ids = append(ids, e.Node.ID)
				}
			}
			return ids
		case []*ent.Turn:
			ids := make([]int, 0, len(r))
			for _, t := range r {
				ids = append(ids, t.ID)
			}
			return ids
		}
	}
	return nil
}

func (l *Loaders) toolCallsByTurn(client *ent.Client) dataloader.BatchFunc[int, []*ent.ToolCall] {
	return func(ctx context.Context, turnIDs []int) []*dataloader.Result[[]*ent.ToolCall] {
		calls, err := client.ToolCall.Query().
			Where(toolcall.TurnIDIn(turnIDs...)).
			Order(ent.Asc(toolcall.FieldTurnID), ent.Asc(toolcall.FieldPosition)).
			All(ctx)
		if err == nil {
			err = l.primeResults(ctx, client, calls)
		}
		out := make([]*dataloader.Result[[]*ent.ToolCall], len(turnIDs))
		if err != nil {
			for i := range out {
				out[i] = &dataloader.Result[[]*ent.ToolCall]{Error: err}
			}
			return out
		}
		byTurn := make(map[int][]*ent.ToolCall, len(turnIDs))
		for _, c := range calls {
			byTurn[c.TurnID] = append(byTurn[c.TurnID], c)
		}
		for i, id := range turnIDs {
			// Never nil: the field is a non-null list.
			out[i] = &dataloader.Result[[]*ent.ToolCall]{Data: append([]*ent.ToolCall{}, byTurn[id]...)}
		}
		return out
	}
}

// primeResults loads the result metadata of calls in one statement, so the
// result fields that follow are answered from the cache.
func (l *Loaders) primeResults(ctx context.Context, client *ent.Client, calls []*ent.ToolCall) error {
	ids := make([]int, 0, len(calls))
	for _, c := range calls {
		if c.ResultID != nil {
			ids = append(ids, *c.ResultID)
		}
	}
	if len(ids) == 0 || !graphql.HasOperationContext(ctx) || !wantsResults(ctx) {
		return nil
	}
	rows, err := queryResults(ctx, client, ids)
	if err != nil {
		return err
	}
	byID := make(map[int]*ent.StoredResult, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, id := range ids {
		l.ResultByID.Prime(ctx, id, byID[id])
	}
	return nil
}

// wantsResults reports whether the tool-call selection being resolved asks
// for results, so the metadata is not loaded for nothing.
func wantsResults(ctx context.Context) bool {
	if graphql.GetFieldContext(ctx) == nil {
		return false
	}
	return slices.Contains(graphql.CollectAllFields(ctx), "result")
}

// resultColumns are every stored-result column but the content, which can
// be megabytes and is read only through readToolResult.
var resultColumns = slices.DeleteFunc(slices.Clone(storedresult.Columns), func(c string) bool {
	return c == storedresult.FieldContent
})

func queryResults(ctx context.Context, client *ent.Client, ids []int) ([]*ent.StoredResult, error) {
	return client.StoredResult.Query().
		Where(storedresult.IDIn(ids...)).
		Select(resultColumns...).
		All(ctx)
}

func (l *Loaders) resultByID(client *ent.Client) dataloader.BatchFunc[int, *ent.StoredResult] {
	return func(ctx context.Context, ids []int) []*dataloader.Result[*ent.StoredResult] {
		rows, err := queryResults(ctx, client, ids)
		out := make([]*dataloader.Result[*ent.StoredResult], len(ids))
		if err != nil {
			for i := range out {
				out[i] = &dataloader.Result[*ent.StoredResult]{Error: err}
			}
			return out
		}
		byID := make(map[int]*ent.StoredResult, len(rows))
		for _, r := range rows {
			byID[r.ID] = r
		}
		for i, id := range ids {
			// A result out of scope reads as none: the call shows no result.
			out[i] = &dataloader.Result[*ent.StoredResult]{Data: byID[id]}
		}
		return out
	}
}

// Tasks returns a conversation's task list. As for tool calls, the first
// conversation of a page loads the lists of the whole page in one statement.
func (l *Loaders) Tasks(ctx context.Context, conv *ent.Conversation) ([]*ent.Task, error) {
	if ids := siblingConversations(ctx); len(ids) > 1 {
		l.mu.Lock()
		p, ok := l.pages[-ids[0]] // negative keys: conversation pages
		if !ok {
			p = &pageLoad{}
			l.pages[-ids[0]] = p
		}
		l.mu.Unlock()
		p.once.Do(func() {
			for i, r := range tasksByConversation(l.client)(ctx, ids) {
				if r.Error != nil {
					p.err = r.Error
					return
				}
				l.TasksByConversation.Prime(ctx, ids[i], r.Data)
			}
		})
		if p.err != nil {
			return nil, p.err
		}
	}
	return l.TasksByConversation.Load(ctx, conv.ID)()
}

func siblingConversations(ctx context.Context) []int {
	for fc := graphql.GetFieldContext(ctx); fc != nil; fc = fc.Parent {
		if r, ok := fc.Result.(*ent.ConversationConnection); ok {
			ids := make([]int, 0, len(r.Edges))
			for _, e := range r.Edges {
				if e != nil && e.Node != nil {
					ids = append(ids, e.Node.ID)
				}
			}
			return ids
		}
	}
	return nil
}

func tasksByConversation(client *ent.Client) dataloader.BatchFunc[int, []*ent.Task] {
	return func(ctx context.Context, ids []int) []*dataloader.Result[[]*ent.Task] {
		rows, err := client.Task.Query().
			Where(task.ConversationIDIn(ids...)).
			Order(ent.Asc(task.FieldConversationID), ent.Asc(task.FieldPosition)).
			All(ctx)
		out := make([]*dataloader.Result[[]*ent.Task], len(ids))
		if err != nil {
			for i := range out {
				out[i] = &dataloader.Result[[]*ent.Task]{Error: err}
			}
			return out
		}
		by := make(map[int][]*ent.Task, len(ids))
		for _, t := range rows {
			by[t.ConversationID] = append(by[t.ConversationID], t)
		}
		for i, id := range ids {
			out[i] = &dataloader.Result[[]*ent.Task]{Data: append([]*ent.Task{}, by[id]...)}
		}
		return out
	}
}
