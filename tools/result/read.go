package result

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/tools"
)

// MaxContextChars bounds contextChars in search mode.
const MaxContextChars = 1000

// Refusal is a call read_tool_result will not carry out: too many refs, a
// budget out of range, an empty query. Its message says what is wrong, with
// the limit, for the model to correct its call.
type Refusal = tools.Refusal

func refusef(format string, args ...any) error { return tools.Refusef(format, args...) }

// Request is one call of read_tool_result: a read of a window of each ref,
// or, when Query is set, a search of them. Nil fields take their defaults.
type Request struct {
	Refs []string
	// Offset is where each ref's window starts, in characters (reads only).
	Offset *int
	// MaxChars is the call's budget of stored text, shared by its refs.
	MaxChars *int
	// Query switches to search mode.
	Query *string
	// Match defaults to Exact.
	Match *Match
	// ContextChars each side of a match; defaults to DefaultContextChars.
	ContextChars *int
}

// Searching reports whether the request is in search mode.
func (q Request) Searching() bool { return q.Query != nil }

// Validate refuses a request outside the tool's limits with a *Refusal.
func (q Request) Validate() error {
	switch n := len(q.Refs); {
	case n == 0:
		return refusef("refs: name 1 to %d refs", MaxRefs)
	case n > MaxRefs:
		return refusef("refs: at most %d refs per call, got %d", MaxRefs, n)
	}
	if q.MaxChars != nil {
		if err := CheckMaxChars(*q.MaxChars); err != nil {
			return refusef("%s", err)
		}
	}
	if q.Offset != nil && *q.Offset < 0 {
		return refusef("offset: %d is negative", *q.Offset)
	}
	if !q.Searching() {
		if q.Match != nil || q.ContextChars != nil {
			// Most likely a search whose query was left out: say so rather
			// than read.
			return refusef("match and contextChars go with query: give the query to search, or leave them out to read")
		}
		return nil
	}
	if strings.TrimSpace(*q.Query) == "" {
		return refusef("query is empty: give the words to find")
	}
	if q.Offset != nil && *q.Offset != 0 {
		return refusef("offset pages reads, not searches: narrow the query or raise maxChars instead")
	}
	if q.Match != nil && *q.Match != Exact && *q.Match != Fuzzy {
		return refusef("match: %q is not %q or %q", *q.Match, Exact, Fuzzy)
	}
	if q.ContextChars != nil && (*q.ContextChars < 0 || *q.ContextChars > MaxContextChars) {
		return refusef("contextChars: %d is not between 0 and %d", *q.ContextChars, MaxContextChars)
	}
	return nil
}

// ReadItem is one ref of a read. A ref refused has only Ref and Error; a
// stored result with nothing readable is Absent; media report their kind
// and size, never text.
type ReadItem struct {
	Ref  string                 `json:"ref"`
	Kind *schematype.ResultKind `json:"kind"`
	// Text is the window: TotalChars from Offset, at most the ref's share of
	// the budget.
	Text       *string `json:"text"`
	Offset     *int    `json:"offset"`
	NextOffset *int    `json:"nextOffset"`
	TotalChars *int    `json:"totalChars"`
	// Bytes is the stored result's size.
	Bytes             *int  `json:"bytes"`
	TruncatedAtSource *bool `json:"truncatedAtSource"`
	Absent            bool  `json:"absent"`
	// Error says why the ref was refused; the same words whatever the reason.
	Error *string `json:"error"`
	// Evidence is the byte range of the stored result Text shows.
	Evidence []schematype.Span `json:"evidence"`
}

// SearchItem is one ref of a search, shaped like ReadItem.
type SearchItem struct {
	Ref  string                 `json:"ref"`
	Kind *schematype.ResultKind `json:"kind"`
	// Hits counts every match in the result; Shown those in Excerpts.
	Hits              int       `json:"hits"`
	Shown             int       `json:"shown"`
	TotalChars        *int      `json:"totalChars"`
	Bytes             *int      `json:"bytes"`
	TruncatedAtSource *bool     `json:"truncatedAtSource"`
	Excerpts          []Excerpt `json:"excerpts"`
	Absent            bool      `json:"absent"`
	Error             *string   `json:"error"`
	// Evidence is the byte ranges of the stored result the excerpts show.
	Evidence []schematype.Span `json:"evidence"`
}

// Results answers one call, ref by ref in request order: Reads in read
// mode, Searches in search mode. Failures lists the refs refused;
// Evidence every byte range of a stored result the call shows.
type Results struct {
	Reads    []*ReadItem              `json:"reads"`
	Searches []*SearchItem            `json:"searches"`
	Failures []schematype.ItemFailure `json:"failures"`
	Evidence []schematype.Span        `json:"evidence"`
}

// Reader reads stored results through a client.
type Reader struct {
	client *ent.Client
	conv   int // 0: wherever the client reaches
	// whole and chunk replace wholeBytes and chunkBytes when set (tests)
	whole, chunk int
}

// New returns a reader of one conversation's stored results. The caller
// has checked that it may reach the conversation and passes its scoped
// client, so a ref is found only when both the scope and the
// conversation hold it.
func New(client *ent.Client, conversationID int) *Reader {
	return &Reader{client: client, conv: conversationID}
}

// Anywhere returns a reader of every stored result the client reaches: the
// API's scoped client limits it to the caller's conversations.
func Anywhere(client *ent.Client) *Reader {
	return &Reader{client: client}
}

// Run validates the request (a *Refusal when it is out of bounds), loads
// its refs in one query and reads or searches them.
func (r *Reader) Run(ctx context.Context, q Request) (*Results, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	budget := DefaultMaxChars
	if q.MaxChars != nil {
		budget = *q.MaxChars
	}
	res := &Results{Reads: []*ReadItem{}, Searches: []*SearchItem{}, Failures: []schematype.ItemFailure{}, Evidence: []schematype.Span{}}
	found := func(i int, ok bool) {
		if !ok {
			ref := q.Refs[i]
			res.Failures = append(res.Failures, schematype.ItemFailure{Item: i, Input: ref, Kind: schematype.FailureRefused, Message: tools.RefNotFound(ref)})
		}
	}
	if q.Searching() {
		rows, err := r.loadSearch(ctx, q.Refs)
		if err != nil {
			return nil, err
		}
		for i, ref := range q.Refs {
			found(i, rows[ref] != nil)
		}
		res.Searches = search(q, rows, budget)
		for _, it := range res.Searches {
			res.Evidence = append(res.Evidence, it.Evidence...)
		}
		return res, nil
	}
	rows, err := r.loadStored(ctx, q.Refs)
	if err != nil {
		return nil, err
	}
	for i, ref := range q.Refs {
		found(i, rows[ref] != nil)
	}
	if res.Reads, err = r.read(ctx, q, rows, budget); err != nil {
		return nil, err
	}
	for _, it := range res.Reads {
		res.Evidence = append(res.Evidence, it.Evidence...)
	}
	return res, nil
}

// searched is a stored result as a search reads it: the content scanned
// straight into a string, copied once on its way from the driver.
type searched struct {
	Ref               string         `sql:"ref"`
	Kind              string         `sql:"kind"`
	TruncatedAtSource bool           `sql:"truncated_at_source"`
	Content           sql.NullString `sql:"content"` // an empty blob may scan as NULL
}

func (r *Reader) loadSearch(ctx context.Context, refs []string) (map[string]*searched, error) {
	q := r.client.StoredResult.Query().Where(storedresult.RefIn(refs...))
	if r.conv != 0 {
		q.Where(storedresult.ConversationID(r.conv))
	}
	var rows []*searched
	err := q.Select(storedresult.FieldRef, storedresult.FieldKind, storedresult.FieldTruncatedAtSource, storedresult.FieldContent).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("load stored results: %w", err)
	}
	out := make(map[string]*searched, len(rows))
	for _, row := range rows {
		out[row.Ref] = row
	}
	return out, nil
}

// unreadable reports a stored result with nothing to read.
func unreadable(kind schematype.ResultKind, content string) bool {
	if kind == schematype.KindMedia {
		return len(content) == 0
	}
	t := strings.TrimSpace(content)
	return len(t) == 0 || kind == schematype.KindJSON && t == "null"
}

// readable is a stored result with text: not refused, not absent, not media.
type readable struct {
	i    int
	text string
	// valid UTF-8, checked once: on large texts the check is a large part
	// of a search.
	valid bool
	// clean is text with each invalid byte replaced (sanitize), as Search
	// takes it.
	clean string
}

// describe fills the fields every found ref reports and picks out those
// with text.
func describe(refs []string, rows map[string]*searched, fill func(i int, row *searched, absent bool), errf func(i int, msg string)) []readable {
	var out []readable
	for i, ref := range refs {
		row := rows[ref]
		switch {
		case row == nil:
			errf(i, tools.RefNotFound(ref))
		case unreadable(schematype.ResultKind(row.Kind), row.Content.String):
			fill(i, row, true)
		default:
			fill(i, row, false)
			if schematype.ResultKind(row.Kind) != schematype.KindMedia {
				t := readable{i: i, text: row.Content.String, clean: row.Content.String, valid: validUTF8(row.Content.String)}
				if !t.valid {
					t.clean = sanitize(t.text)
				}
				out = append(out, t)
			}
		}
	}
	return out
}

// read reads a window of each ref. A result loaded whole is windowed in
// memory; a large one has its window fetched (Reader.window), its total
// from its chars column, which counts as Window does.
func (r *Reader) read(ctx context.Context, q Request, rows map[string]*stored, budget int) ([]*ReadItem, error) {
	type text struct {
		i     int
		row   *stored
		text  string // loaded whole
		valid bool
		total int
	}
	items := make([]*ReadItem, len(q.Refs))
	var texts []text
	for i, ref := range q.Refs {
		row := rows[ref]
		if row == nil {
			msg := tools.RefNotFound(ref)
			items[i] = &ReadItem{Ref: ref, Error: &msg, Evidence: []schematype.Span{}}
			continue
		}
		kind := schematype.ResultKind(row.Kind)
		if row.Whole == nil && kind != schematype.KindMedia && (!row.large() || !headReadable(kind, row.Head)) {
			content, err := r.loadContent(ctx, row.ID)
			if err != nil {
				return nil, err
			}
			row.Whole = content
		}
		size, absent := int(row.Bytes), false
		var whole string
		if row.Whole != nil {
			size = len(row.Whole)
			whole = string(row.Whole)
			absent = unreadable(kind, whole)
		} else if kind == schematype.KindMedia {
			absent = size == 0
		}
		items[i] = &ReadItem{Ref: row.Ref, Kind: &kind, Bytes: ptr(size),
			TruncatedAtSource: ptr(row.TruncatedAtSource), Absent: absent, Evidence: []schematype.Span{}}
		if absent || kind == schematype.KindMedia {
			continue
		}
		t := text{i: i, row: row, total: int(row.Chars)}
		if row.Whole != nil {
			t.text, t.valid = whole, validUTF8(whole)
			t.total = runeCount(t.text, t.valid)
		}
		texts = append(texts, t)
	}
	offset := 0
	if q.Offset != nil {
		offset = *q.Offset
	}
	// Alone, a ref has the whole budget; several share it by need.
	shareOf := func(int) int { return budget }
	if len(texts) > 1 {
		needs := make([]int, len(texts))
		for j, t := range texts {
			needs[j] = max(t.total-offset, 0)
		}
		shareOf = func(j int) int { return share(budget, needs, j) }
	}
	for j, t := range texts {
		it := items[t.i]
		// A share of 0 would mean the default; a ref with nothing left
		// from offset reads empty whatever its share.
		var p Page
		var start, end int
		if t.row.Whole != nil {
			p = Window(t.text, offset, max(shareOf(j), 1))
			if p.Text != "" {
				b := byteOffsets(t.text, t.valid, []int{p.Offset, p.Offset + utf8.RuneCountInString(p.Text)})
				start, end = b[0], b[1]
			}
		} else {
			from := min(max(offset, 0), t.total)
			n := min(max(shareOf(j), 1), t.total-from)
			p = Page{Offset: from, NextOffset: -1, Total: t.total}
			if from+n < t.total {
				p.NextOffset = from + n
			}
			if n > 0 {
				var err error
				if p.Text, start, end, err = r.window(ctx, t.row, from, n); err != nil {
					return nil, err
				}
			}
		}
		it.Text, it.Offset, it.TotalChars = &p.Text, &p.Offset, &p.Total
		if p.NextOffset >= 0 {
			it.NextOffset = &p.NextOffset
		}
		if p.Text != "" {
			it.Evidence = append(it.Evidence, schematype.Span{Ref: it.Ref, Start: int64(start), End: int64(end)})
		}
	}
	return items, nil
}

func search(q Request, rows map[string]*searched, budget int) []*SearchItem {
	items := make([]*SearchItem, len(q.Refs))
	texts := describe(q.Refs, rows, func(i int, row *searched, absent bool) {
		kind := schematype.ResultKind(row.Kind)
		items[i] = &SearchItem{Ref: row.Ref, Kind: &kind, Bytes: ptr(len(row.Content.String)),
			TruncatedAtSource: &row.TruncatedAtSource, Absent: absent, Excerpts: []Excerpt{}, Evidence: []schematype.Span{}}
	}, func(i int, msg string) {
		items[i] = &SearchItem{Ref: q.Refs[i], Error: &msg, Excerpts: []Excerpt{}, Evidence: []schematype.Span{}}
	})
	match, contextChars := Exact, DefaultContextChars
	if q.Match != nil {
		match = *q.Match
	}
	if q.ContextChars != nil {
		contextChars = *q.ContextChars
	}
	// The refs share the budget evenly; what those that showed every match
	// leave goes to those that could not, searched again. So the excerpts
	// stay within the budget, and a lone ref is searched once.
	found := make([]SearchResult, len(texts))
	var even int
	if len(texts) > 0 {
		even = budget / len(texts)
	}
	spare := 0
	var cut []int
	for j, t := range texts {
		found[j] = searchClean(t.clean, *q.Query, match, contextChars, max(even, 1))
		if found[j].Shown < found[j].Hits {
			cut = append(cut, j)
		} else {
			spare += even - shownChars(found[j])
		}
	}
	if spare > 0 && len(cut) > 0 {
		for _, j := range cut {
			found[j] = searchClean(texts[j].clean, *q.Query, match, contextChars, even+spare/len(cut))
		}
	}
	for j, t := range texts {
		it, f := items[t.i], found[j]
		it.Hits, it.Shown, it.TotalChars = f.Hits, f.Shown, &f.Total
		if len(f.Excerpts) > 0 {
			it.Excerpts = f.Excerpts
		}
		points := make([]int, 0, 2*len(f.Excerpts))
		for _, ex := range f.Excerpts {
			points = append(points, ex.Offset, ex.Offset+utf8.RuneCountInString(ex.Text))
		}
		b := byteOffsets(t.text, t.valid, points)
		for k := 0; k < len(b); k += 2 {
			if b[k] < b[k+1] {
				it.Evidence = append(it.Evidence, schematype.Span{Ref: it.Ref, Start: int64(b[k]), End: int64(b[k+1])})
			}
		}
	}
	return items
}

func shownChars(r SearchResult) int {
	n := 0
	for _, ex := range r.Excerpts {
		n += utf8.RuneCountInString(ex.Text)
	}
	return n
}

// share is item j's part of budget when items want needs: the budget is
// split evenly, and what a smaller need leaves goes to the larger ones
// (water-filling), so the shares never pass the budget together and no
// need within its even part is cut.
func share(budget int, needs []int, j int) int {
	order := make([]int, len(needs))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return needs[a] - needs[b] })
	left := budget
	for k, idx := range order {
		s := min(needs[idx], left/(len(order)-k))
		if idx == j {
			return s
		}
		left -= s
	}
	return 0
}

// runeCount counts characters as Window does: an invalid byte is one.
func runeCount(s string, valid bool) int {
	if valid {
		return countChars(s)
	}
	return utf8.RuneCountInString(s)
}

// byteOffsets turns character offsets of text, valid UTF-8 or not, into
// byte offsets, in one pass whatever their order. Characters count as
// Window and Search count them: an invalid UTF-8 byte is one character
// (shown as U+FFFD), so the byte ranges name the stored bytes, not the
// sanitized ones.
func byteOffsets(text string, valid bool, chars []int) []int {
	order := make([]int, len(chars))
	for k := range order {
		order[k] = k
	}
	slices.SortFunc(order, func(a, b int) int { return chars[a] - chars[b] })
	out := make([]int, len(chars))
	pos, at := 0, 0
	for _, k := range order {
		want := chars[k]
		if valid {
			var moved int
			pos, moved = advance(text, pos, want-at)
			at += moved
		} else {
			for at < want && pos < len(text) {
				_, size := utf8.DecodeRuneInString(text[pos:])
				pos += size
				at++
			}
		}
		out[k] = pos
	}
	return out
}

func ptr[T any](v T) *T { return &v }
