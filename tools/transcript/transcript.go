// Package transcript is read_transcript: earlier turns of the current
// conversation, verbatim, chosen by a range of turn numbers or by literal
// words, within a character budget.
//
// # What a read returns
//
// Each turn gives its number, start time, what the person wrote, what the
// assistant wrote (the words of every step that also called tools, before
// that step's calls, and the answer), and for each tool call its name, the
// first 400 characters of its arguments and its ref. Thinking is never
// read, not even from the database. The asking turn (the turn whose scope
// token reads) is left out.
//
// # Rendering and budget
//
// The model reads Page.Text, where each turn is rendered as
//
//	[turn 3, 2025-03-01 11:04 Europe/Berlin]
//	user: what is 2/3?
//	assistant: Let me work it out.
//	tool calculator {"expression":"2/3"} ref r_x1
//	assistant: 0.666666666667
//
// with a blank line between turns, the time in the zone the turn kept,
// and … after arguments that were cut. The budget (maxChars, 6,000 by
// default, at most 20,000) counts the characters of Text and is spent on
// whole turns: a read that stops early is marked truncated and gives the
// offset to continue from; a first turn larger than the budget still comes
// back whole.
//
// # Words
//
// Words are split on spaces; a turn matches when every word appears, case
// folded, in what the person wrote or in what the assistant wrote (the
// answer, or the words of a step). Tool-call arguments
// are not searched: only their first 400 characters are ever shown, and a
// match the reader cannot see would mislead.
package transcript

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/predicate"
	"github.com/toolgate/toolgate/ent/toolcall"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/tools"
)

// The product's numbers, and this package's own limits on words.
const (
	// DefaultChars is the budget of a read that names none.
	DefaultChars = 6_000
	// MaxChars is the largest budget a read may ask for.
	MaxChars = 20_000
	// ArgumentChars is how much of each tool call's arguments is shown.
	ArgumentChars = 400
	// MaxWords is how many words one read may look for.
	MaxWords = 10
	// MaxWordsChars bounds the words argument.
	MaxWordsChars = 200
)

// minTurnChars is a lower bound of one rendered turn, separator
// included: a budget can hold at most budget/minTurnChars turns, which
// bounds how many rows a read loads.
const minTurnChars = 30

// Query says what to read. Nil pointers take their defaults.
type Query struct {
	// ConversationID is the conversation read.
	ConversationID int
	// AskingTurnID is left out of the read; 0 when no turn asks (an API
	// token in the playground).
	AskingTurnID int
	// FromTurn and ToTurn bound the turn numbers, both included.
	FromTurn, ToTurn *int
	// Words, when set, keeps the turns where every word appears.
	Words *string
	// Offset skips that many turns of the selection: a truncated read's
	// NextOffset.
	Offset *int
	// MaxChars is the budget, DefaultChars when nil.
	MaxChars *int
}

// Validate reports what is wrong with q, in words for the caller, naming
// the limit.
func (q Query) Validate() error {
	switch {
	case q.FromTurn != nil && *q.FromTurn < 1:
		return errors.New("fromTurn must be 1 or more")
	case q.ToTurn != nil && *q.ToTurn < 1:
		return errors.New("toTurn must be 1 or more")
	case q.FromTurn != nil && q.ToTurn != nil && *q.FromTurn > *q.ToTurn:
		return fmt.Errorf("fromTurn %d is after toTurn %d", *q.FromTurn, *q.ToTurn)
	case q.Offset != nil && *q.Offset < 0:
		return errors.New("offset must be 0 or more")
	case q.MaxChars != nil && (*q.MaxChars < 1 || *q.MaxChars > MaxChars):
		return fmt.Errorf("maxChars must be between 1 and %d", MaxChars)
	}
	if q.Words != nil {
		n := len(strings.Fields(*q.Words))
		switch {
		case n == 0:
			return errors.New("words: give at least one word, or leave words out")
		case n > MaxWords:
			return fmt.Errorf("words: at most %d words, got %d", MaxWords, n)
		case utf8.RuneCountInString(*q.Words) > MaxWordsChars:
			return fmt.Errorf("words: at most %d characters", MaxWordsChars)
		}
	}
	return nil
}

func (q Query) budget() int {
	if q.MaxChars == nil {
		return DefaultChars
	}
	return *q.MaxChars
}

func (q Query) offset() int {
	if q.Offset == nil {
		return 0
	}
	return *q.Offset
}

// Page is one read.
type Page struct {
	// Turns are the turns read, in order of their numbers.
	Turns []Turn
	// Text is the turns as the model reads them; the budget counts its
	// characters.
	Text string
	// Truncated is set when turns of the selection were left for a next
	// read.
	Truncated bool
	// NextOffset is the offset to continue from, when Truncated.
	NextOffset *int
}

// Turn is one turn as read.
type Turn struct {
	Number    int
	StartedAt time.Time
	// TimeZone is the zone the turn kept; StartedAt is rendered in it.
	TimeZone string
	UserText string
	Answer   *string
	// Said is what the assistant wrote in the steps that also called
	// tools, in order, verbatim; each came before its step's calls. The
	// answer is apart.
	Said      []Said
	ToolCalls []ToolCall
}

// Said is what the assistant wrote in one step of a turn.
type Said struct {
	// Step is the model call, from 0 for the turn's first.
	Step int
	Text string
}

// ToolCall is one tool call of a turn as read.
type ToolCall struct {
	// Step is the model call that asked for it, from 0.
	Step int
	Name string
	// Arguments are the first ArgumentChars characters of the JSON sent.
	Arguments string
	// ArgumentsTruncated is set when the arguments were longer.
	ArgumentsTruncated bool
	// Ref names the stored result, for read_tool_result.
	Ref *string
	// ArgumentsRef holds the arguments whole when a value was too long to
	// replay, for read_tool_result.
	ArgumentsRef *string
}

// Read reads the turns q selects through client (the API's scoped client:
// a conversation out of scope has no turns). It sends three statements,
// turns, what the assistant wrote in their steps, and their tool calls,
// however many turns there are, and never reads thinking. Without words
// the database returns only the rows that can fit; with words it returns
// every turn its LIKE narrowing keeps, and the exact match, offset and
// budget are applied here.
func Read(ctx context.Context, client *ent.Client, q Query) (*Page, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	budget, offset := q.budget(), q.offset()
	// More turns than this cannot fit, and one more tells there are more.
	limit := budget/minTurnChars + 1

	tq := client.Turn.Query().Where(turn.ConversationID(q.ConversationID))
	if q.AskingTurnID != 0 {
		tq.Where(turn.IDNEQ(q.AskingTurnID))
	}
	if q.FromTurn != nil {
		tq.Where(turn.NumberGTE(*q.FromTurn))
	}
	if q.ToTurn != nil {
		tq.Where(turn.NumberLTE(*q.ToTurn))
	}
	var words []string
	if q.Words != nil {
		words = strings.Fields(*q.Words)
		for _, w := range words {
			p := likePattern(w)
			tq.Where(turn.Or(like(turn.FieldUserText, p), like(turn.FieldAnswer, p),
				turn.HasModelCallsWith(modelcall.KindEQ(modelcall.KindSTEP), predicate.ModelCall(likeSQL(modelcall.FieldText, p)))))
		}
	} else {
		// Without words the database picks the page itself; with words it
		// only narrows, and the exact match below decides.
		tq.Offset(offset).Limit(limit)
	}
	rows, err := tq.Order(ent.Asc(turn.FieldNumber)).
		Select(turn.FieldNumber, turn.FieldStartedAt, turn.FieldTimeZone, turn.FieldUserText, turn.FieldAnswer).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load turns: %w", err)
	}
	// With words, what the steps said is matched too, so it is loaded for
	// every turn the narrowing kept; without, for the turns that can fit.
	var said map[int][]Said
	if words != nil {
		if said, err = loadSaid(ctx, client, rows); err != nil {
			return nil, err
		}
		rows = matching(rows, said, words)
		rows = rows[min(offset, len(rows)):]
		rows = rows[:min(limit, len(rows))]
	}
	zones := map[string]*time.Location{}
	rows = prune(rows, budget, zones)
	if words == nil {
		if said, err = loadSaid(ctx, client, rows); err != nil {
			return nil, err
		}
	}
	calls, err := loadCalls(ctx, client, rows)
	if err != nil {
		return nil, err
	}
	return render(rows, said, calls, budget, offset, zones), nil
}

// prune drops the rows that cannot fit even without their tool calls and
// their steps' words, keeping the first that overflows so that render
// sees the read is cut: their calls need not be loaded.
func prune(rows []*ent.Turn, budget int, zones map[string]*time.Location) []*ent.Turn {
	used := 0
	for i, r := range rows {
		t := Turn{Number: r.Number, StartedAt: r.StartedAt, UserText: r.UserText, Answer: r.Answer}
		used += utf8.RuneCountInString(renderTurn(t, zone(zones, r.TimeZone)))
		if i > 0 {
			used++ // the blank line before it
		}
		// The first turn comes back whole whatever its size.
		if i > 0 && used > budget {
			return rows[:i+1]
		}
	}
	return rows
}

// matching keeps the rows where every word appears, case folded, in the
// user text, the answer or what a step said.
func matching(rows []*ent.Turn, said map[int][]Said, words []string) []*ent.Turn {
	folded := make([]string, len(words))
	for i, w := range words {
		folded[i] = tools.Fold(w)
	}
	out := rows[:0]
	for _, r := range rows {
		texts := []string{tools.Fold(r.UserText)}
		if r.Answer != nil {
			texts = append(texts, tools.Fold(*r.Answer))
		}
		for _, st := range said[r.ID] {
			texts = append(texts, tools.Fold(st.Text))
		}
		ok := true
		for _, w := range folded {
			if !slices.ContainsFunc(texts, func(t string) bool { return strings.Contains(t, w) }) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// loadSaid loads, in one statement, what the assistant wrote in each
// step of turns: the text of their model calls (never thinking, which a
// model call does not hold), steps in order, empty ones left out.
func loadSaid(ctx context.Context, client *ent.Client, turns []*ent.Turn) (map[int][]Said, error) {
	if len(turns) == 0 {
		return nil, nil
	}
	ids := make([]int, len(turns))
	for i, t := range turns {
		ids[i] = t.ID
	}
	var rows []struct {
		TurnID int    `sql:"turn_id"`
		Step   int    `sql:"step"`
		Text   string `sql:"text"`
	}
	err := client.ModelCall.Query().
		Where(modelcall.TurnIDIn(ids...), modelcall.KindEQ(modelcall.KindSTEP), modelcall.TextNEQ("")).
		Order(ent.Asc(modelcall.FieldTurnID), ent.Asc(modelcall.FieldStep)).
		Select(modelcall.FieldTurnID, modelcall.FieldStep, modelcall.FieldText).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("load what the steps said: %w", err)
	}
	out := make(map[int][]Said, len(turns))
	for _, r := range rows {
		out[r.TurnID] = append(out[r.TurnID], Said{Step: r.Step, Text: r.Text})
	}
	return out, nil
}

type callRow struct {
	TurnID    int     `sql:"turn_id"`
	Step      int     `sql:"step"`
	Name      string  `sql:"name"`
	Arguments string  `sql:"arguments"`
	Ref       *string `sql:"ref"`
	ArgsRef   *string `sql:"arguments_ref"`
}

// loadCalls loads the tool calls of turns in one statement, with only the
// head of their arguments: arguments can be whole files.
func loadCalls(ctx context.Context, client *ent.Client, turns []*ent.Turn) (map[int][]callRow, error) {
	if len(turns) == 0 {
		return nil, nil
	}
	ids := make([]int, len(turns))
	for i, t := range turns {
		ids[i] = t.ID
	}
	var rows []callRow
	err := client.ToolCall.Query().
		Where(toolcall.TurnIDIn(ids...)).
		Order(ent.Asc(toolcall.FieldTurnID), ent.Asc(toolcall.FieldPosition)).
		Select(toolcall.FieldTurnID, toolcall.FieldStep, toolcall.FieldName, toolcall.FieldRef, toolcall.FieldArgumentsRef).
		Aggregate(func(s *sql.Selector) string {
			// One character more than is shown tells whether there was more.
			return sql.As(fmt.Sprintf("SUBSTR(%s, 1, %d)", s.C(toolcall.FieldArguments), ArgumentChars+1), "arguments")
		}).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("load tool calls: %w", err)
	}
	byTurn := make(map[int][]callRow, len(turns))
	for _, r := range rows {
		byTurn[r.TurnID] = append(byTurn[r.TurnID], r)
	}
	return byTurn, nil
}

// render spends the budget on whole turns, the first one always.
func render(rows []*ent.Turn, said map[int][]Said, calls map[int][]callRow, budget, offset int, zones map[string]*time.Location) *Page {
	p := &Page{Turns: []Turn{}}
	var text strings.Builder
	used := 0
	for i, r := range rows {
		t := Turn{
			Number:    r.Number,
			StartedAt: r.StartedAt,
			TimeZone:  r.TimeZone,
			UserText:  r.UserText,
			Answer:    r.Answer,
			Said:      []Said{},
			ToolCalls: []ToolCall{},
		}
		for _, c := range calls[r.ID] {
			args, cut := head(c.Arguments, ArgumentChars)
			t.ToolCalls = append(t.ToolCalls, ToolCall{Step: c.Step, Name: c.Name, Arguments: args, ArgumentsTruncated: cut,
				Ref: c.Ref, ArgumentsRef: c.ArgsRef})
		}
		t.Said = spoken(said[r.ID], t.ToolCalls, r.Answer)
		s := renderTurn(t, zone(zones, r.TimeZone))
		if i > 0 {
			s = "\n" + s
		}
		n := utf8.RuneCountInString(s)
		if i > 0 && used+n > budget {
			p.Truncated = true
			break
		}
		used += n
		text.WriteString(s)
		p.Turns = append(p.Turns, t)
	}
	// Read loads one row more than can fit (minTurnChars), so a selection
	// with more turns than were loaded always ends here truncated.
	if p.Truncated {
		next := offset + len(p.Turns)
		p.NextOffset = &next
	}
	p.Text = text.String()
	return p
}

// spoken picks what a turn's steps said that the answer does not hold:
// the words of each step that called tools. A step without calls is the
// one that answered, so its words are the answer's; they are kept only
// when no answer was recorded with them.
func spoken(said []Said, calls []ToolCall, answer *string) []Said {
	out := []Said{}
	for _, st := range said {
		called := slices.ContainsFunc(calls, func(c ToolCall) bool { return c.Step == st.Step })
		if strings.TrimSpace(st.Text) != "" && (called || answer == nil || *answer == "") {
			out = append(out, st)
		}
	}
	return out
}

func renderTurn(t Turn, loc *time.Location) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[turn %d, %s %s]\n", t.Number, t.StartedAt.In(loc).Format("2006-01-02 15:04"), loc)
	b.WriteString("user: ")
	b.WriteString(t.UserText)
	b.WriteByte('\n')
	// Each step's words come before its calls, in the order they were
	// written; words of a step with no calls (an answer not recorded as
	// one) after every call.
	said := t.Said
	writeSaid := func(upTo int) {
		for len(said) > 0 && said[0].Step <= upTo {
			b.WriteString("assistant: ")
			b.WriteString(said[0].Text)
			b.WriteByte('\n')
			said = said[1:]
		}
	}
	for _, c := range t.ToolCalls {
		writeSaid(c.Step)
		b.WriteString("tool ")
		b.WriteString(c.Name)
		b.WriteByte(' ')
		b.WriteString(c.Arguments)
		if c.ArgumentsTruncated {
			b.WriteString("…")
		}
		if c.Ref != nil {
			b.WriteString(" ref ")
			b.WriteString(*c.Ref)
		}
		if c.ArgumentsTruncated && c.ArgumentsRef != nil {
			b.WriteString(" arguments ref ")
			b.WriteString(*c.ArgumentsRef)
		}
		b.WriteByte('\n')
	}
	writeSaid(math.MaxInt)
	if t.Answer != nil && *t.Answer != "" {
		b.WriteString("assistant: ")
		b.WriteString(*t.Answer)
		b.WriteByte('\n')
	}
	return b.String()
}

func zone(cache map[string]*time.Location, name string) *time.Location {
	if loc, ok := cache[name]; ok {
		return loc
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" {
		// A zone this machine does not know reads as UTC, as no zone does.
		loc = time.UTC
	}
	cache[name] = loc
	return loc
}

// head returns the first n characters of s, and whether there were more.
func head(s string, n int) (string, bool) {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos], true
		}
		i++
	}
	return s, false
}

// like is LOWER(col) LIKE pattern, written out because ent's ContainsFold
// escapes the wildcards likePattern relies on.
func like(col, pattern string) predicate.Turn { return predicate.Turn(likeSQL(col, pattern)) }

// likeSQL is like for a column of any table.
func likeSQL(col, pattern string) func(*sql.Selector) {
	return func(s *sql.Selector) {
		s.Where(sql.P(func(b *sql.Builder) {
			b.WriteString("LOWER(").WriteString(s.C(col)).WriteString(") LIKE ")
			b.Arg(pattern)
			b.WriteString(` ESCAPE '\'`)
		}))
	}
}

// likePattern turns a word into a LIKE pattern that matches at least
// every text the exact, case-folded match accepts, on SQLite (whose LOWER
// folds ASCII only) and PostgreSQL alike: ASCII characters whose case
// variants are all ASCII stand for themselves, lowered; every other
// character is a one-character wildcard. Case folding keeps the count of
// characters, so the wildcard lines up.
func likePattern(word string) string {
	var b strings.Builder
	b.WriteByte('%')
	for _, r := range word {
		switch {
		case r == '\uE000':
			// the db package's text escape: PostgreSQL holds it as two characters.
			b.WriteByte('%')
		case !asciiOrbit(r):
			b.WriteByte('_')
		case r == '%' || r == '_' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	b.WriteByte('%')
	return b.String()
}

// asciiOrbit reports whether r and every character that folds with it are
// ASCII ('k' is not: the Kelvin sign folds to it).
func asciiOrbit(r rune) bool {
	if r >= utf8.RuneSelf {
		return false
	}
	for _, f := range tools.CaseVariants(r) {
		if f >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
