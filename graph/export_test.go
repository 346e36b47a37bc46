package graph

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/toolgate/toolgate/graph/generated"
)

// FastFields are the fields the transcript's hot path writes of typ.
func FastFields(typ string) map[string]bool {
	out := map[string]bool{}
	for name := range fastSchema()[typ] {
		out[name] = true
	}
	return out
}

// HotPathTakes reports whether the hot path takes the query's conversation
// or root turns field (its selection and its turns' arguments, where
// included; the rows are not read), as the server decides it for the same
// document and variables.
func HotPathTakes(query string, vars map[string]any) (bool, error) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	doc, errs := gqlparser.LoadQueryWithRules(schema, query, nil)
	if len(errs) > 0 {
		return false, errs
	}
	raw, err := json.Marshal(vars)
	if err != nil {
		return false, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var decoded map[string]any
	if err := dec.Decode(&decoded); err != nil {
		return false, err
	}
	op := doc.Operations[0]
	coerced, gerr := validator.VariableValues(schema, op, decoded)
	if gerr != nil {
		return false, gerr
	}
	oc := &graphql.OperationContext{Doc: doc, Operation: op, Variables: coerced}
	for _, f := range graphql.CollectFields(oc, op.SelectionSet, []string{"Query"}) {
		if f.Name == "turns" {
			if _, ok := collectFast(oc, f, "TurnConnection"); !ok {
				return false, nil
			}
			_, ok := rootTurnsPage(f.ArgumentMap(oc.Variables))
			return ok, nil
		}
		if f.Name != "conversation" {
			continue
		}
		sel, ok := collectFast(oc, f, "Conversation")
		if !ok {
			return false, nil
		}
		if turns := find(sel, "turns"); turns != nil {
			_, ok = turnPage(turns)
			ok = ok && find(turns.kids, "totalCount") == nil
		}
		return ok, nil
	}
	return false, nil
}

// SetLoaderWait sets how long the server's loaders gather keys that arrive
// one by one, before it serves its first request.
func SetLoaderWait(s *Server, d time.Duration) { s.loaderWait = d }
