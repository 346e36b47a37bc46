package graph

import (
	"context"
	"errors"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// Bounds of one GraphQL document, checked before it is validated: the
// validator's cost grows with the document expanded (fragment spreads
// replaced by their fragments) and, for fields of one name, with its square.
// A portal's transcript query is about 600 bytes, 150 tokens, 40 fields and
// depth 7; GraphiQL's introspection query about 1,500 bytes, 400 tokens,
// 230 fields, 10 spreads and depth 15.
const (
	// MaxQueryBytes is the longest query text.
	MaxQueryBytes = 32 << 10
	// MaxQueryTokens is the most lexer tokens in a query.
	MaxQueryTokens = 5_000
	// MaxQueryFields is the most fields in a query, every fragment spread
	// counted as the fields of its fragment.
	MaxQueryFields = 500
	// MaxQuerySpreads is the most fragment spreads in a query, spreads
	// inside fragments counted each time their fragment is spread.
	MaxQuerySpreads = 100
	// MaxQueryDepth is the deepest nesting of selections, fragments
	// expanded.
	MaxQueryDepth = 20
	// MaxQueryRepeats is the most fields of one response name (its alias,
	// or else its name) in one selection set, its inline fragments
	// included: the validator compares them two by two.
	MaxQueryRepeats = 20
)

// codeQueryTooLarge is the error code of a query over one of the bounds.
const codeQueryTooLarge = "QUERY_TOO_LARGE"

func init() {
	// Refused before it is validated, like an invalid query, with the same
	// status code.
	errcode.RegisterErrorType(codeQueryTooLarge, errcode.KindProtocol)
}

// queryLimits refuses a query over the bounds above before gqlgen
// validates it. It reads the text once and parses it once with a token
// limit, which costs time in proportion to the bytes; the counts come from
// one pass over the fragments, each counted once however often it is
// spread.
type queryLimits struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = queryLimits{}

// ExtensionName names the extension.
func (queryLimits) ExtensionName() string { return "QueryLimits" }

// Validate has nothing to check.
func (queryLimits) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters checks the query's text; automatic persisted
// queries have put it in place by now.
func (queryLimits) MutateOperationParameters(_ context.Context, p *graphql.RawParams) *gqlerror.Error {
	return checkQuery(p.Query)
}

func checkQuery(query string) *gqlerror.Error {
	if len(query) > MaxQueryBytes {
		return queryTooLarge("query over %d bytes", MaxQueryBytes)
	}
	if query == "" {
		return nil
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, MaxQueryTokens)
	if err != nil {
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && strings.HasPrefix(gqlErr.Message, "exceeded token limit") {
			return queryTooLarge("query over %d tokens", MaxQueryTokens)
		}
		// A syntax error: gqlgen parses it again and says where, in its
		// usual words. The text is within the bounds, so that is cheap.
		return nil
	}
	// Only the first of two fragments of one name would be counted below;
	// the validator refuses the pair anyway, and here it costs nothing.
	names := make(map[string]bool, len(doc.Fragments))
	for _, f := range doc.Fragments {
		if names[f.Name] {
			return validationError(f.Position, "There can be only one fragment named %q.", f.Name)
		}
		names[f.Name] = true
	}
	c := newQuerySize(doc)
	var total querySize
	for _, op := range doc.Operations {
		total = total.plus(c.selections(op.SelectionSet))
	}
	// A fragment spread nowhere is still validated: count it as if an
	// operation spread it. One that is spread is counted where it is.
	for _, f := range doc.Fragments {
		c.fragment(f.Name) // marks the fragments it spreads
	}
	for _, f := range doc.Fragments {
		if !c.spread[f.Name] {
			total = total.plus(c.fragment(f.Name))
		}
	}
	switch {
	case c.repeated != "":
		return queryTooLarge("query asks for %q over %d times in one selection", c.repeated, MaxQueryRepeats)
	case total.fields > MaxQueryFields:
		return queryTooLarge("query over %d fields (each fragment counted wherever it is spread)", MaxQueryFields)
	case total.spreads > MaxQuerySpreads:
		return queryTooLarge("query over %d fragment spreads (spreads in fragments counted wherever their fragment is spread)", MaxQuerySpreads)
	case total.depth > MaxQueryDepth:
		return queryTooLarge("query nested over %d levels deep", MaxQueryDepth)
	}
	return nil
}

func queryTooLarge(format string, args ...any) *gqlerror.Error {
	e := gqlerror.Errorf(format+": ask for less in one request", args...)
	errcode.Set(e, codeQueryTooLarge)
	return e
}

// querySize is what a selection set expands to. Counts saturate just past
// the largest bound, so a fragment spread 2^30 times adds, it never
// overflows.
type querySize struct {
	fields, spreads, depth int
}

const sizeCap = 1 << 20

func (a querySize) plus(b querySize) querySize {
	return querySize{
		fields:  min(a.fields+b.fields, sizeCap),
		spreads: min(a.spreads+b.spreads, sizeCap),
		depth:   max(a.depth, b.depth),
	}
}

// querySizer expands fragments once each: a fragment's size is computed on
// its first spread and reused after.
type querySizer struct {
	defs  map[string]*ast.FragmentDefinition
	sizes map[string]querySize
	busy  map[string]bool
	// spread holds the fragments spread somewhere.
	spread map[string]bool
	// repeated is the first response name found over MaxQueryRepeats
	// times in one selection set.
	repeated string
}

func newQuerySize(doc *ast.QueryDocument) *querySizer {
	c := &querySizer{defs: map[string]*ast.FragmentDefinition{}, sizes: map[string]querySize{}, busy: map[string]bool{}, spread: map[string]bool{}}
	for _, f := range doc.Fragments {
		c.defs[f.Name] = f
	}
	return c
}

func (c *querySizer) fragment(name string) querySize {
	if s, ok := c.sizes[name]; ok {
		return s
	}
	def, ok := c.defs[name]
	if !ok || c.busy[name] {
		// Unknown, or spread inside itself: the validator says so, at no
		// great cost, and nothing here expands it.
		return querySize{}
	}
	c.busy[name] = true
	s := c.selections(def.SelectionSet)
	c.busy[name] = false
	c.sizes[name] = s
	return s
}

func (c *querySizer) selections(set ast.SelectionSet) querySize {
	if c.repeated == "" && (len(set) > MaxQueryRepeats || hasInline(set)) {
		c.checkRepeats(set, map[string]int{})
	}
	var s querySize
	for _, sel := range set {
		switch x := sel.(type) {
		case *ast.Field:
			inner := c.selections(x.SelectionSet)
			inner.depth++
			inner.fields = min(inner.fields+1, sizeCap)
			s = s.plus(inner)
		case *ast.InlineFragment:
			s = s.plus(c.selections(x.SelectionSet))
		case *ast.FragmentSpread:
			c.spread[x.Name] = true
			f := c.fragment(x.Name)
			f.spreads = min(f.spreads+1, sizeCap)
			s = s.plus(f)
		}
	}
	return s
}

// checkRepeats counts the response names of a selection set and of the
// inline fragments in it, which the validator merges with it.
func (c *querySizer) checkRepeats(set ast.SelectionSet, seen map[string]int) {
	for _, sel := range set {
		switch x := sel.(type) {
		case *ast.Field:
			name := x.Alias
			if name == "" {
				name = x.Name
			}
			seen[name]++
			if seen[name] > MaxQueryRepeats && c.repeated == "" {
				c.repeated = name
			}
		case *ast.InlineFragment:
			c.checkRepeats(x.SelectionSet, seen)
		}
	}
}

func hasInline(set ast.SelectionSet) bool {
	for _, sel := range set {
		if _, ok := sel.(*ast.InlineFragment); ok {
			return true
		}
	}
	return false
}
