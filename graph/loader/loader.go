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
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/graph-gophers/dataloader/v7"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/approval"
	"github.com/toolgate/toolgate/ent/attachment"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/summary"
	"github.com/toolgate/toolgate/ent/task"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turnrating"
	"github.com/toolgate/toolgate/ent/user"
	"github.com/toolgate/toolgate/tools/budget"
)

// Wait is how long a loader gathers keys that arrive one by one (a turn
// reached through node(), say) before it queries.
const Wait = 2 * time.Millisecond

// Loaders are the per-request loaders.
type Loaders struct {
	client *ent.Client
	wait   time.Duration // how long a loader gathers keys (NewWaiting)
	mu     sync.Mutex
	pages  map[string]*pageLoad // by kind and the first sibling's id
	// toolCalls load the tool calls of turns, ordered by position, one
	// loader for each set of JSON columns asked for (see Columns).
	toolCalls map[Columns]*dataloader.Loader[int, []*ent.ToolCall]

	// ResultByID loads stored-result metadata, never the content.
	ResultByID *dataloader.Loader[int, *ent.StoredResult]
	// TasksByConversation loads conversations' task lists, in order.
	TasksByConversation *dataloader.Loader[int, []*ent.Task]
	// ModelCallsByTurn loads turns' model calls, in step order.
	ModelCallsByTurn *dataloader.Loader[int, []*ent.ModelCall]
	// ApprovalsByTurn loads the approvals of turns' calls, in the model's
	// order.
	ApprovalsByTurn *dataloader.Loader[int, []*ent.Approval]
	// SummariesByConversation loads conversations' summaries, oldest range first.
	SummariesByConversation *dataloader.Loader[int, []*ent.Summary]
	// AttachmentsByConversation loads conversations' attachments, oldest
	// first, without their bytes or text.
	AttachmentsByConversation *dataloader.Loader[int, []*ent.Attachment]
	// RatingsByTurn loads turns' ratings the caller may read, the latest
	// changed first.
	RatingsByTurn *dataloader.Loader[int, []*ent.TurnRating]
	// UserByID loads people (the raters of a page's ratings); one out of
	// reach reads as none.
	UserByID *dataloader.Loader[int, *ent.User]
	// Spending loads what an organisation's users spent in a UTC month, one
	// statement for every budget of a response.
	Spending *dataloader.Loader[SpendingKey, budget.Spending]
}

// SpendingKey names an organisation and a UTC month (any time in it).
type SpendingKey struct {
	Organization int
	Month        string // YYYY-MM
}

// New returns loaders that query through client (the API's scoped client).
func New(client *ent.Client) *Loaders { return NewWaiting(client, Wait) }

// NewWaiting returns loaders that gather keys arriving one by one for wait
// (Wait for New) before they query.
func NewWaiting(client *ent.Client, wait time.Duration) *Loaders {
	l := &Loaders{client: client, wait: wait, pages: map[string]*pageLoad{}, toolCalls: map[Columns]*dataloader.Loader[int, []*ent.ToolCall]{}}
	l.ResultByID = dataloader.NewBatchedLoader(l.resultByID(client),
		dataloader.WithWait[int, *ent.StoredResult](l.wait))
	l.TasksByConversation = dataloader.NewBatchedLoader(tasksByConversation(client),
		dataloader.WithWait[int, []*ent.Task](l.wait))
	l.ModelCallsByTurn = dataloader.NewBatchedLoader(modelCallsByTurn(client),
		dataloader.WithWait[int, []*ent.ModelCall](l.wait))
	l.ApprovalsByTurn = dataloader.NewBatchedLoader(approvalsByTurn(client),
		dataloader.WithWait[int, []*ent.Approval](l.wait))
	l.SummariesByConversation = dataloader.NewBatchedLoader(summariesByConversation(client),
		dataloader.WithWait[int, []*ent.Summary](l.wait))
	l.AttachmentsByConversation = dataloader.NewBatchedLoader(attachmentsByConversation(client),
		dataloader.WithWait[int, []*ent.Attachment](l.wait))
	l.RatingsByTurn = dataloader.NewBatchedLoader(ratingsByTurn(client),
		dataloader.WithWait[int, []*ent.TurnRating](l.wait))
	l.UserByID = dataloader.NewBatchedLoader(usersByID(client),
		dataloader.WithWait[int, *ent.User](l.wait))
	l.Spending = dataloader.NewBatchedLoader(spending(client),
		dataloader.WithWait[SpendingKey, budget.Spending](l.wait))
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

// pageOnce runs load once per page of siblings (keyed by kind, the first
// sibling's id and their number) and returns its error to every caller of
// that page.
func (l *Loaders) pageOnce(kind string, ids []int, load func() error) error {
	key := fmt.Sprintf("%s:%d:%d", kind, ids[0], len(ids))
	l.mu.Lock()
	p, ok := l.pages[key]
	if !ok {
		p = &pageLoad{}
		l.pages[key] = p
	}
	l.mu.Unlock()
	p.once.Do(func() { p.err = load() })
	return p.err
}

// primeAll runs batch for a page of ids and primes loader with the answers.
func primeAll[V any](ctx context.Context, loader *dataloader.Loader[int, V], batch dataloader.BatchFunc[int, V], ids []int) error {
	for i, r := range batch(ctx, ids) {
		if r.Error != nil {
			return r.Error
		}
		loader.Prime(ctx, ids[i], r.Data)
	}
	return nil
}

// Columns names the JSON columns of a tool call a read needs: decoding
// them is most of the cost of a page of calls, and most reads ask for few
// or none of them.
type Columns uint8

// The JSON columns of a tool call, each read only when asked for.
const (
	Failures Columns = 1 << iota
	Evidence
	Repairs
	// AllColumns reads every JSON column.
	AllColumns = Failures | Evidence | Repairs
)

// ColumnsFor returns the JSON columns the tool-call fields being resolved
// in ctx select (the fields of a toolCalls selection, say).
func ColumnsFor(ctx context.Context) Columns {
	if graphql.GetFieldContext(ctx) == nil {
		return AllColumns
	}
	var c Columns
	for _, f := range graphql.CollectAllFields(ctx) {
		switch f {
		case "failures":
			c |= Failures
		case "evidence":
			c |= Evidence
		case "repairs":
			c |= Repairs
		}
	}
	return c
}

// toolCallLoader returns the request's loader of tool calls reading cols.
func (l *Loaders) toolCallLoader(cols Columns) *dataloader.Loader[int, []*ent.ToolCall] {
	l.mu.Lock()
	defer l.mu.Unlock()
	ld, ok := l.toolCalls[cols]
	if !ok {
		ld = dataloader.NewBatchedLoader(l.toolCallsByTurn(l.client, cols),
			dataloader.WithWait[int, []*ent.ToolCall](l.wait))
		l.toolCalls[cols] = ld
	}
	return ld
}

// ToolCalls returns the tool calls of turn, with the JSON columns cols (the
// others are left empty). The first call for a page of turns loads the
// whole page in one statement and primes the cache; the siblings wait for
// it and read the cache, so the count of statements does not depend on how
// the resolvers are scheduled.
func (l *Loaders) ToolCalls(ctx context.Context, turn *ent.Turn, cols Columns) ([]*ent.ToolCall, error) {
	ld := l.toolCallLoader(cols)
	if ids := together(ctx, turn.ID, siblingTurns); ids != nil {
		err := l.pageOnce(fmt.Sprintf("toolcalls%d", cols), ids, func() error {
			return primeAll(ctx, ld, l.toolCallsByTurn(l.client, cols), ids)
		})
		if err != nil {
			return nil, err
		}
	}
	return ld.Load(ctx, turn.ID)()
}

// ModelCalls returns the model calls of turn, in step order, loading those
// of the turn's whole page in the same statement.
func (l *Loaders) ModelCalls(ctx context.Context, turn *ent.Turn) ([]*ent.ModelCall, error) {
	if ids := together(ctx, turn.ID, siblingTurns); ids != nil {
		err := l.pageOnce("modelcalls", ids, func() error {
			return primeAll(ctx, l.ModelCallsByTurn, modelCallsByTurn(l.client), ids)
		})
		if err != nil {
			return nil, err
		}
	}
	return l.ModelCallsByTurn.Load(ctx, turn.ID)()
}

// Approvals returns the approvals of turn's calls, in the model's order,
// loading those of the turn's whole page in the same statement: a
// transcript that asks each call for its approval, or each turn for what
// waits, costs one statement for them all.
func (l *Loaders) Approvals(ctx context.Context, turn *ent.Turn) ([]*ent.Approval, error) {
	if ids := together(ctx, turn.ID, siblingTurns); ids != nil {
		err := l.pageOnce("approvals", ids, func() error {
			return primeAll(ctx, l.ApprovalsByTurn, approvalsByTurn(l.client), ids)
		})
		if err != nil {
			return nil, err
		}
	}
	return l.ApprovalsByTurn.Load(ctx, turn.ID)()
}

// Ratings returns the ratings of turn the caller may read, the latest
// changed first, loading those of the turn's whole page in the same
// statement. Turn.myRating and Turn.ratings both read it, so a page asking
// for both still sends one statement.
func (l *Loaders) Ratings(ctx context.Context, turn *ent.Turn) ([]*ent.TurnRating, error) {
	if ids := together(ctx, turn.ID, siblingTurns); ids != nil {
		err := l.pageOnce("ratings", ids, func() error {
			if err := primeAll(ctx, l.RatingsByTurn, ratingsByTurn(l.client), ids); err != nil {
				return err
			}
			return l.primeRaters(ctx, ids)
		})
		if err != nil {
			return nil, err
		}
	}
	return l.RatingsByTurn.Load(ctx, turn.ID)()
}

// primeRaters loads, in one statement, the people who rated the turns of
// a page, when the turn's selection asks who rated (under ratings or
// myRating, whichever of the two is resolved first).
func (l *Loaders) primeRaters(ctx context.Context, turnIDs []int) error {
	if !wantsRaters(ctx) {
		return nil
	}
	var ids []int
	for _, id := range turnIDs {
		rs, err := l.RatingsByTurn.Load(ctx, id)()
		if err != nil {
			return err
		}
		for _, r := range rs {
			ids = append(ids, r.UserID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return primeAll(ctx, l.UserByID, usersByID(l.client), ids)
}

// wantsRaters reports whether the turn whose rating field is being
// resolved selects, under ratings or myRating, who rated.
func wantsRaters(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Parent == nil || !graphql.HasOperationContext(ctx) {
		return false
	}
	op := graphql.GetOperationContext(ctx)
	turnTypes := []string{"Turn", "Node"}
	for _, f := range graphql.CollectFields(op, fc.Parent.Field.Selections, turnTypes) {
		if f.Name != "ratings" && f.Name != "myRating" {
			continue
		}
		for _, g := range graphql.CollectFields(op, f.Selections, []string{"TurnRating"}) {
			if g.Name == "user" {
				return true
			}
		}
	}
	return false
}

// together returns the keys to load with id in one statement, at once
// and without waiting for more: those of its siblings (siblings, when
// they are more than id alone), or id alone when the object it names is no
// element of a list (alone). Nil leaves id to the loader, which waits for
// others to batch with.
func together(ctx context.Context, id int, siblings func(context.Context) []int) []int {
	if ids := siblings(ctx); len(ids) > 1 {
		return ids
	}
	if alone(ctx) {
		return []int{id}
	}
	return nil
}

// alone reports whether the object whose field is resolved in ctx is no
// element of a list: no field above it returns one, as for node(id:),
// conversation(id:) or a mutation's payload. Its key is then all there is
// of its kind in its place, and a loader waiting Wait for more would only
// delay the answer; a document that names several such objects (aliases)
// loads each with a statement of its own, as many as its fields.
func alone(ctx context.Context) bool {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil {
		return false
	}
	for fc = fc.Parent; fc != nil; fc = fc.Parent {
		switch {
		case fc.Index != nil:
			return false // an element's own context, which gqlgen adds in a list
		case fc.Field.Field == nil:
			// the operation's root
		case fc.Field.Definition == nil || fc.Field.Definition.Type == nil || fc.Field.Definition.Type.Elem != nil:
			return false
		}
	}
	return true
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

func (l *Loaders) toolCallsByTurn(client *ent.Client, cols Columns) dataloader.BatchFunc[int, []*ent.ToolCall] {
	columns := callColumns(cols)
	return func(ctx context.Context, turnIDs []int) []*dataloader.Result[[]*ent.ToolCall] {
		calls, err := client.ToolCall.Query().
			Where(toolcall.TurnIDIn(turnIDs...)).
			Order(ent.Asc(toolcall.FieldTurnID), ent.Asc(toolcall.FieldPosition)).
			Select(columns...).
			All(ctx)
		if err == nil {
			err = l.primeResults(ctx, client, calls)
		}
		return group(turnIDs, calls, err, func(c *ent.ToolCall) int { return c.TurnID })
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

// callColumns are the tool-call columns to read: never what the model
// heard, which can be thousands of characters a call and no field returns,
// and of the JSON columns only those in cols.
func callColumns(cols Columns) []string {
	skip := map[string]bool{
		toolcall.FieldHeard:    true,
		toolcall.FieldFailures: cols&Failures == 0,
		toolcall.FieldEvidence: cols&Evidence == 0,
		toolcall.FieldRepairs:  cols&Repairs == 0,
	}
	return slices.DeleteFunc(slices.Clone(toolcall.Columns), func(c string) bool { return skip[c] })
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
	if ids := together(ctx, conv.ID, siblingConversations); ids != nil {
		err := l.pageOnce("tasks", ids, func() error {
			return primeAll(ctx, l.TasksByConversation, tasksByConversation(l.client), ids)
		})
		if err != nil {
			return nil, err
		}
	}
	return l.TasksByConversation.Load(ctx, conv.ID)()
}

// Summaries returns a conversation's summaries, ordered by the last turn
// they cover, loading those of the conversation's whole page in the same
// statement.
func (l *Loaders) Summaries(ctx context.Context, conv *ent.Conversation) ([]*ent.Summary, error) {
	if ids := together(ctx, conv.ID, siblingConversations); ids != nil {
		err := l.pageOnce("summaries", ids, func() error {
			return primeAll(ctx, l.SummariesByConversation, summariesByConversation(l.client), ids)
		})
		if err != nil {
			return nil, err
		}
	}
	return l.SummariesByConversation.Load(ctx, conv.ID)()
}

// Attachments returns the attachments of conv; a page of conversations
// loads in one statement, like Tasks.
func (l *Loaders) Attachments(ctx context.Context, conv *ent.Conversation) ([]*ent.Attachment, error) {
	if ids := together(ctx, conv.ID, siblingConversations); ids != nil {
		err := l.pageOnce("attachments", ids, func() error {
			return primeAll(ctx, l.AttachmentsByConversation, attachmentsByConversation(l.client), ids)
		})
		if err != nil {
			return nil, err
		}
	}
	return l.AttachmentsByConversation.Load(ctx, conv.ID)()
}

func attachmentsByConversation(client *ent.Client) dataloader.BatchFunc[int, []*ent.Attachment] {
	var cols []string
	for _, c := range attachment.Columns {
		if c != attachment.FieldOriginal && c != attachment.FieldText {
			cols = append(cols, c)
		}
	}
	return func(ctx context.Context, ids []int) []*dataloader.Result[[]*ent.Attachment] {
		rows, err := client.Attachment.Query().
			Where(attachment.ConversationIDIn(ids...)).
			Order(ent.Asc(attachment.FieldConversationID), ent.Asc(attachment.FieldID)).
			Select(cols...).
			All(ctx)
		return group(ids, rows, err, func(a *ent.Attachment) int { return a.ConversationID })
	}
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
		return group(ids, rows, err, func(t *ent.Task) int { return t.ConversationID })
	}
}

func summariesByConversation(client *ent.Client) dataloader.BatchFunc[int, []*ent.Summary] {
	return func(ctx context.Context, ids []int) []*dataloader.Result[[]*ent.Summary] {
		rows, err := client.Summary.Query().
			Where(summary.ConversationIDIn(ids...)).
			Order(ent.Asc(summary.FieldConversationID), ent.Asc(summary.FieldToTurn)).
			All(ctx)
		return group(ids, rows, err, func(s *ent.Summary) int { return s.ConversationID })
	}
}

func modelCallsByTurn(client *ent.Client) dataloader.BatchFunc[int, []*ent.ModelCall] {
	return func(ctx context.Context, ids []int) []*dataloader.Result[[]*ent.ModelCall] {
		rows, err := client.ModelCall.Query().
			Where(modelcall.TurnIDIn(ids...)).
			Order(ent.Asc(modelcall.FieldTurnID), ent.Asc(modelcall.FieldStep)).
			All(ctx)
		return group(ids, rows, err, func(m *ent.ModelCall) int { return m.TurnID })
	}
}

func approvalsByTurn(client *ent.Client) dataloader.BatchFunc[int, []*ent.Approval] {
	return func(ctx context.Context, ids []int) []*dataloader.Result[[]*ent.Approval] {
		rows, err := client.Approval.Query().
			Where(approval.TurnIDIn(ids...)).
			Order(ent.Asc(approval.FieldTurnID), ent.Asc(approval.FieldToolCallID)).
			All(ctx)
		return group(ids, rows, err, func(a *ent.Approval) int { return a.TurnID })
	}
}

func ratingsByTurn(client *ent.Client) dataloader.BatchFunc[int, []*ent.TurnRating] {
	return func(ctx context.Context, ids []int) []*dataloader.Result[[]*ent.TurnRating] {
		rows, err := client.TurnRating.Query().
			Where(turnrating.TurnIDIn(ids...)).
			Order(ent.Asc(turnrating.FieldTurnID), ent.Desc(turnrating.FieldUpdatedAt), ent.Asc(turnrating.FieldID)).
			All(ctx)
		return group(ids, rows, err, func(r *ent.TurnRating) int { return r.TurnID })
	}
}

func usersByID(client *ent.Client) dataloader.BatchFunc[int, *ent.User] {
	return func(ctx context.Context, ids []int) []*dataloader.Result[*ent.User] {
		rows, err := client.User.Query().Where(user.IDIn(ids...)).All(ctx)
		out := make([]*dataloader.Result[*ent.User], len(ids))
		byID := make(map[int]*ent.User, len(rows))
		for _, u := range rows {
			byID[u.ID] = u
		}
		for i, id := range ids {
			out[i] = &dataloader.Result[*ent.User]{Data: byID[id], Error: err}
		}
		return out
	}
}

func spending(client *ent.Client) dataloader.BatchFunc[SpendingKey, budget.Spending] {
	return func(ctx context.Context, keys []SpendingKey) []*dataloader.Result[budget.Spending] {
		out := make([]*dataloader.Result[budget.Spending], len(keys))
		for i, k := range keys {
			month, err := time.Parse("2006-01", k.Month)
			if err == nil {
				var s budget.Spending
				s, err = budget.SpentIn(ctx, client, k.Organization, month)
				out[i] = &dataloader.Result[budget.Spending]{Data: s, Error: err}
				continue
			}
			out[i] = &dataloader.Result[budget.Spending]{Error: err}
		}
		return out
	}
}

// group aligns rows to keys 1:1, never nil, or gives every key err.
func group[T any](keys []int, rows []T, err error, key func(T) int) []*dataloader.Result[[]T] {
	out := make([]*dataloader.Result[[]T], len(keys))
	if err != nil {
		for i := range out {
			out[i] = &dataloader.Result[[]T]{Error: err}
		}
		return out
	}
	by := make(map[int][]T, len(keys))
	for _, r := range rows {
		by[key(r)] = append(by[key(r)], r)
	}
	for i, k := range keys {
		out[i] = &dataloader.Result[[]T]{Data: append([]T{}, by[k]...)}
	}
	return out
}
