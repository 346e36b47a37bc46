package graph

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"entgo.io/contrib/entgql"
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// pageLimits checks every connection in an operation before anything runs:
// a page is at most MaxPage items, and a nested connection must name its
// size (field collection would otherwise load it whole).
type pageLimits struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = pageLimits{}

// ExtensionName names the extension.
func (pageLimits) ExtensionName() string { return "PageLimits" }

// Validate has nothing to check.
func (pageLimits) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext walks the operation's fields.
func (pageLimits) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	return checkPages(oc, oc.Operation.SelectionSet, true, map[string]bool{})
}

func checkPages(oc *graphql.OperationContext, set ast.SelectionSet, root bool, seen map[string]bool) *gqlerror.Error {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Arguments.ForName("where") != nil {
				if err := checkFilter(s.Position, s.ArgumentMap(oc.Variables)["where"]); err != nil {
					return err
				}
			}
			if s.Definition != nil && strings.HasSuffix(s.Definition.Type.Name(), "Connection") {
				args := s.ArgumentMap(oc.Variables)
				first, hasFirst := args["first"].(int64)
				last, hasLast := args["last"].(int64)
				if (hasFirst && (first < 0 || first > MaxPage)) || (hasLast && (last < 0 || last > MaxPage)) {
					return validationError(s.Position, "%s: first and last must be between 0 and %d", s.Alias, MaxPage)
				}
				if !root && !hasFirst && !hasLast {
					return validationError(s.Position, "%s: give first or last (at most %d)", s.Alias, MaxPage)
				}
				// Field collection reads nested cursors itself and cannot
				// report a bad one: check every cursor here, once.
				for _, name := range []string{"after", "before"} {
					if v, ok := args[name]; ok && v != nil {
						var c entgql.Cursor[int]
						if c.UnmarshalGQL(v) != nil {
							return badCursor(s.Position, name)
						}
					}
				}
			}
			if err := checkPages(oc, s.SelectionSet, false, seen); err != nil {
				return err
			}
		case *ast.InlineFragment:
			if err := checkPages(oc, s.SelectionSet, root, seen); err != nil {
				return err
			}
		case *ast.FragmentSpread:
			key := s.Name
			if root {
				key += "@root"
			}
			if seen[key] || s.Definition == nil {
				continue
			}
			seen[key] = true
			if err := checkPages(oc, s.Definition.SelectionSet, root, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// transactioner runs each mutation in a transaction (entgql.Transactioner)
// and passes through responses that have no operation, such as the error
// for a body that is not JSON.
type transactioner struct{ entgql.Transactioner }

// InterceptResponse opens the transaction for mutations, but for those
// that only run code (ownTx).
func (t transactioner) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	if !graphql.HasOperationContext(ctx) || ownTx(graphql.GetOperationContext(ctx).Operation) {
		return next(ctx)
	}
	return t.Transactioner.InterceptResponse(ctx, next)
}

// ownTxFields run for seconds before they write, or write the search
// index on a connection of its own: a transaction held open would hold
// SQLite's one write lock the whole time (and the index's write would wait
// on it), so they open their own for the writes at the end.
var ownTxFields = []string{"runCode", "memoryWrite", "memoryForget", "forgetMemory", "inspectArtifact", "printPdf"}

// ownTx reports whether every root field of a mutation opens its own
// transaction. Fragments at the root count as any other field.
func ownTx(op *ast.OperationDefinition) bool {
	if op == nil || op.Operation != ast.Mutation || len(op.SelectionSet) == 0 {
		return false
	}
	for _, sel := range op.SelectionSet {
		f, ok := sel.(*ast.Field)
		if !ok || !slices.Contains(ownTxFields, f.Name) {
			return false
		}
	}
	return true
}

func validationError(pos *ast.Position, format string, args ...any) *gqlerror.Error {
	e := gqlerror.ErrorPosf(pos, format, args...)
	errcode.Set(e, errcode.ValidationFailed)
	return e
}

// malformedCursor is what a caller reads for a cursor that is not one of
// ours, wherever it was given.
func malformedCursor(arg string) string {
	return fmt.Sprintf("malformed cursor in argument %q: use a cursor from pageInfo or an edge", arg)
}

func badCursor(pos *ast.Position, arg string) *gqlerror.Error {
	e := gqlerror.ErrorPosf(pos, "%s", malformedCursor(arg))
	e.Extensions = map[string]any{"code": "BAD_USER_INPUT"}
	return e
}

func init() {
	// An over-complex operation is refused before it runs, like any other
	// invalid request, and gets the same status code.
	errcode.RegisterErrorType("COMPLEXITY_LIMIT_EXCEEDED", errcode.KindProtocol)
}

// jsonStatus answers 200 to every well-formed request when the client asked
// for application/json, as the GraphQL-over-HTTP spec says; the 4xx codes
// for request errors belong to application/graphql-response+json.
func jsonStatus(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&statusWriter{ResponseWriter: w}, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
}

func (w *statusWriter) WriteHeader(code int) {
	if code == http.StatusUnprocessableEntity && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		code = http.StatusOK
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (websockets).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Bounds of a filter (a where argument): the database gets one predicate
// per field and one nesting level per not, and, or and has…With.
const (
	// MaxFilterPredicates is the most fields set in one filter, nested
	// filters included.
	MaxFilterPredicates = 100
	// MaxFilterDepth is the deepest nesting of filters within a filter.
	MaxFilterDepth = 8
	// MaxFilterString is the longest string in a filter, in bytes.
	MaxFilterString = 1024
)

// checkFilter refuses a filter past its bounds with BAD_USER_INPUT naming
// the argument, before the database is asked.
func checkFilter(pos *ast.Position, where any) *gqlerror.Error {
	predicates := 0
	var walk func(v any, depth int) string
	walk = func(v any, depth int) string {
		switch x := v.(type) {
		case map[string]any:
			if depth > MaxFilterDepth {
				return fmt.Sprintf("filters nested over %d deep (not, and, or, has…With)", MaxFilterDepth)
			}
			for _, item := range x {
				if predicates++; predicates > MaxFilterPredicates {
					return fmt.Sprintf("over %d predicates", MaxFilterPredicates)
				}
				if msg := walk(item, depth+1); msg != "" {
					return msg
				}
			}
		case []any:
			for _, item := range x {
				if msg := walk(item, depth); msg != "" {
					return msg
				}
			}
		case string:
			if len(x) > MaxFilterString {
				return fmt.Sprintf("a string over %d bytes", MaxFilterString)
			}
		}
		return ""
	}
	msg := walk(where, 0)
	if msg == "" {
		return nil
	}
	e := gqlerror.ErrorPosf(pos, "invalid argument \"where\": %s", msg)
	e.Extensions = map[string]any{"code": "BAD_USER_INPUT"}
	return e
}
