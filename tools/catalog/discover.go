package catalog

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/tools"
)

// separator joins an application's name and its tool's name, as the model
// sees application tools.
const separator = "__"

// Hint is what get_tool_schema says when it does not know a name.
const Hint = "Unknown names are not tools you may use: list_tools lists them all, search_tools finds them by words."

// Index is what the discovery tools search: the tools one agent's turns may
// be offered, built-in tools in registration order, then application tools.
type Index struct {
	entries []entry
	byName  map[string]int
}

type entry struct {
	name        string
	description string
	// parameters is the argument schema as the model receives it; nil for
	// an application tool whose server did not answer.
	parameters  Schema
	application string
	nameWords   []string
	descWords   []string
}

// Load builds the index for an agent of the caller's organisation, read
// through client (scoped to the caller), on server s. Application tools are
// described as their servers list them, through list (nil: by name only).
// When the index answers a turn, offered is the turn's own list of tools
// (its scope token's): it holds what the agent's rules alone cannot know,
// the tools of the conversation's attachments and the get_tool_schema a
// deferring turn is given.
func Load(ctx context.Context, client *ent.Client, agentID int, builtin []tools.Definition, list Lister, s offer.Server, offered func(name string) bool) (*Index, error) {
	ag, err := client.Agent.Query().Where(agent.ID(agentID)).WithOrganization().Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("load agent: %w", err)
	}
	a, err := offer.LoadRules(ctx, client, ag, ag.Edges.Organization, s)
	if err != nil {
		return nil, err
	}
	apps, err := Applications(ctx, client, a, list)
	if err != nil {
		return nil, err
	}
	a.Turn = offered
	return NewIndex(a, builtin, apps), nil
}

// NewIndex builds the index of the tools a's turns may be offered: the
// built-in definitions it is offered, then, in allowlist order, the tools
// a lists as "<application>__<tool>" that the application allows, with
// their servers' descriptions and schemas.
func NewIndex(a *offer.Agent, builtin []tools.Definition, apps []Application) *Index {
	ix := &Index{byName: make(map[string]int)}
	for _, d := range offer.Register(a, builtin, nil) {
		ix.add(entry{name: d.Name, description: d.Description, parameters: parameters(d)})
	}
	for _, t := range appTools(a, apps) {
		if t.def == nil {
			ix.add(entry{name: t.name, application: t.application,
				description: "A tool of application " + t.application + ", whose server did not answer: its description is unknown."})
			continue
		}
		ix.add(entry{name: t.name, description: t.def.Description, parameters: parameters(*t.def), application: t.application})
	}
	return ix
}

func (ix *Index) add(e entry) {
	if _, ok := ix.byName[e.name]; ok {
		return
	}
	e.nameWords = words(e.name)
	e.descWords = words(e.description)
	ix.byName[e.name] = len(ix.entries)
	ix.entries = append(ix.entries, e)
}

// Brief is a tool's name with its description cut to MaxDescription characters.
type Brief struct {
	Name        string
	Description string
}

// Found is one query's answer: every matching tool, best first.
type Found struct {
	Query string
	Tools []Brief
}

// Search is search_tools' answer.
type Search struct {
	// Results holds one answer per distinct query, in the order first asked.
	Results []Found
	// Note says which queries repeated earlier ones, when some did.
	Note *string
	// Failures are the queries that could not run.
	Failures []schematype.ItemFailure
}

// CheckQueries refuses a search_tools call that asks nothing or more than
// MaxQueries distinct queries.
func CheckQueries(queries []string) error {
	if len(queries) == 0 {
		return fmt.Errorf("queries: give at least one query")
	}
	if n := len(distinct(queries).items); n > MaxQueries {
		return fmt.Errorf("queries: %d distinct, at most %d per call", n, MaxQueries)
	}
	return nil
}

// plan is a many-item call with repeats collapsed and blank items failed.
type plan struct {
	items    []string // distinct, as first asked
	repeats  []int    // positions of items that repeat earlier ones
	failures []schematype.ItemFailure
}

// distinct collapses items that are the same once case and spacing are
// ignored; matching ignores both, so they would get the same answer.
func distinct(items []string) plan {
	var p plan
	seen := make(map[string]bool)
	for i, s := range items {
		key := tools.QueryKey(s)
		switch {
		case key == "":
			p.failures = append(p.failures, schematype.ItemFailure{Item: i, Input: s, Kind: schematype.FailureRefused, Message: "blank"})
		case seen[key]:
			p.repeats = append(p.repeats, i)
		default:
			seen[key] = true
			p.items = append(p.items, strings.TrimSpace(s))
		}
	}
	return p
}

// Search answers each distinct query concurrently, in the order first asked.
func (ix *Index) Search(ctx context.Context, queries []string) (*Search, error) {
	if err := CheckQueries(queries); err != nil {
		return nil, err
	}
	p := distinct(queries)
	out := &Search{Results: make([]Found, len(p.items)), Failures: p.failures}
	var wg sync.WaitGroup
	for i, q := range p.items {
		wg.Go(func() {
			out.Results[i] = Found{Query: q, Tools: ix.match(q)}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("search tools: %w", err)
	}
	if len(p.repeats) > 0 {
		out.Note = new(repeatNote(p.repeats))
	}
	if out.Failures == nil {
		out.Failures = []schematype.ItemFailure{}
	}
	return out, nil
}

func repeatNote(items []int) string {
	s := make([]string, len(items))
	for i, n := range items {
		s[i] = strconv.Itoa(n)
	}
	if len(items) == 1 {
		return "item " + s[0] + " repeats an earlier query: answered once"
	}
	return "items " + strings.Join(s, ", ") + " repeat earlier queries: answered once"
}

// match ranks the tools that share a word with q: most query words matched
// first, then the closest matches (name before description, whole words
// before prefixes), then registration order.
func (ix *Index) match(q string) []Brief {
	qw := words(q)
	if kept := slices.DeleteFunc(slices.Clone(qw), stopWord); len(kept) > 0 {
		qw = kept
	}
	whole := strings.ToLower(q)
	type hit struct{ i, matched, score int }
	var hits []hit
	for i, e := range ix.entries {
		h := hit{i: i}
		for _, w := range qw {
			if s := e.score(w); s > 0 {
				h.matched++
				h.score += s
			}
		}
		if strings.ToLower(e.name) == whole {
			h.score += 100
		}
		if h.matched > 0 {
			hits = append(hits, h)
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		return cmp.Or(cmp.Compare(b.matched, a.matched), cmp.Compare(b.score, a.score))
	})
	out := make([]Brief, len(hits))
	for k, h := range hits {
		out[k] = ix.entries[h.i].brief()
	}
	return out
}

// score is how well the query word w matches the entry: 4 a word of its
// name, 3 a prefix-related word of its name, 2 and 1 the same for its
// description, 0 nothing.
func (e entry) score(w string) int {
	best := 0
	for _, n := range e.nameWords {
		switch {
		case n == w:
			return 4
		case related(n, w):
			best = 3
		}
	}
	if best > 0 {
		return best
	}
	for _, d := range e.descWords {
		switch {
		case d == w:
			return 2
		case related(d, w):
			best = 1
		}
	}
	return best
}

// related reports whether one word starts with the other ("file", "files"),
// for words long enough to mean something.
func related(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= 3 && strings.HasPrefix(b, a)
}

// words splits s into lower-case runs of letters and digits; '_' and '-'
// separate words, so "read_tool_result" is "read", "tool", "result".
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"can": true, "do": true, "for": true, "from": true, "how": true, "i": true, "in": true, "is": true,
	"it": true, "me": true, "my": true, "of": true, "on": true, "or": true, "the": true, "to": true,
	"what": true, "with": true, "you": true, "your": true,
}

func stopWord(w string) bool { return stopWords[w] }

func (e entry) brief() Brief {
	return Brief{Name: e.name, Description: Shorten(e.description)}
}

// List is list_tools' answer.
type List struct {
	// Tools are every tool the agent may use, built-in ones in registration
	// order, then application tools.
	Tools []Brief
}

// List answers list_tools: every name, each description shortened.
func (ix *Index) List() *List {
	out := &List{Tools: make([]Brief, len(ix.entries))}
	for i, e := range ix.entries {
		out.Tools[i] = e.brief()
	}
	return out
}

// ToolSchema is a tool as get_tool_schema gives it: whole.
type ToolSchema struct {
	Name        string
	Description string
	// Parameters is the argument schema as the model receives it.
	Parameters Schema
}

// Schemas is get_tool_schema's answer.
type Schemas struct {
	Tools []ToolSchema
	// Missing are the names of no tool the agent may use; Hint then says
	// how to find the right ones.
	Missing  []string
	Hint     *string
	Failures []schematype.ItemFailure
}

// CheckNames refuses a get_tool_schema call that names nothing or more than
// MaxNames distinct tools.
func CheckNames(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("names: give at least one tool name")
	}
	seen := make(map[string]bool)
	for _, n := range names {
		seen[strings.TrimSpace(n)] = true
	}
	if len(seen) > MaxNames {
		return fmt.Errorf("names: %d distinct, at most %d per call", len(seen), MaxNames)
	}
	return nil
}

// Schemas answers get_tool_schema: each named tool whole, in the order
// asked, repeats once; an application tool with the schema its server
// lists. A tool whose server did not answer fails as an item and says so.
func (ix *Index) Schemas(names []string) (*Schemas, error) {
	if err := CheckNames(names); err != nil {
		return nil, err
	}
	out := &Schemas{Tools: []ToolSchema{}, Missing: []string{}, Failures: []schematype.ItemFailure{}}
	seen := make(map[string]bool)
	for i, raw := range names {
		n := strings.TrimSpace(raw)
		if seen[n] {
			continue
		}
		seen[n] = true
		k, ok := ix.byName[n]
		switch {
		case !ok:
			out.Missing = append(out.Missing, raw)
		case ix.entries[k].parameters == nil:
			out.Failures = append(out.Failures, schematype.ItemFailure{Item: i, Input: raw, Kind: schematype.FailureOutage,
				Message: "the server of application " + ix.entries[k].application + " did not answer: its schema is unknown; try again later"})
		default:
			e := ix.entries[k]
			out.Tools = append(out.Tools, ToolSchema{Name: e.name, Description: e.description, Parameters: e.parameters})
		}
	}
	if len(out.Missing) > 0 {
		out.Hint = new(Hint)
	}
	return out, nil
}

// NothingFound is search_tools' absence rule: no query matched a tool.
var NothingFound = tools.NothingFound("tools")

// Shorten cuts a description to MaxDescription characters (tools.Shorten).
func Shorten(s string) string { return tools.Shorten(s, MaxDescription) }

// Schema is a JSON Schema, passed to GraphQL clients as JSON rather than
// as a string, so the model reads it as it reads its tool list.
type Schema json.RawMessage

// MarshalGQL writes the schema as it is: compact JSON.
func (s Schema) MarshalGQL(w io.Writer) {
	if len(s) == 0 {
		_, _ = io.WriteString(w, "null")
		return
	}
	_, _ = w.Write(s)
}

// UnmarshalGQL reads a schema given as a GraphQL value.
func (s *Schema) UnmarshalGQL(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	*s = b
	return nil
}
