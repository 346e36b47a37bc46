package tools

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/ent/schematype"
)

// The multi-query tools (memory, past conversations, documents, the web,
// the catalogue's search) take several queries in one call and answer one
// list of hits per query. What they share is written here once: the
// schema of the queries argument, how a repeated query is told apart, the
// rule that nothing was found, and the words of a query that matched
// nothing.

// QueryKey is a query as repeats are told apart: case and spacing aside,
// since matching ignores both and the repeat would get the same answer.
func QueryKey(q string) string { return strings.ToLower(strings.Join(strings.Fields(q), " ")) }

// QueriesSchema is the "queries" property of a multi-query tool's JSON
// Schema, as the text between the braces of "properties": 1 to maxQueries
// non-empty strings of at most maxChars characters.
func QueriesSchema(maxQueries, maxChars int) string {
	return `"queries":{"type":"array","items":{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(maxChars) +
		`},"minItems":1,"maxItems":` + strconv.Itoa(maxQueries) + `}`
}

// NothingFound returns the absence rule of a multi-query result, an object
// whose "results" each hold a list under hits: nothing found when no
// query's list has an entry. The failures then say, per query, whether that
// is an absence or an outage. A result of another shape found something.
func NothingFound(hits string) func(json.RawMessage) bool {
	return func(raw json.RawMessage) bool {
		var r struct {
			Results []map[string]json.RawMessage `json:"results"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return false
		}
		for _, q := range r.Results {
			var list []json.RawMessage
			if json.Unmarshal(q[hits], &list) == nil && len(list) > 0 {
				return false
			}
		}
		return true
	}
}

// QueryHits is one query's hits, best first: the shape every multi-query
// tool answers each query with.
type QueryHits[H any] struct {
	Query string `json:"query"`
	Hits  []H    `json:"hits"`
}

// Unmatched is the failure of the query at item that ran and matched
// nothing.
func Unmatched(item int, query string) schematype.ItemFailure {
	return schematype.ItemFailure{Item: item, Input: query, Kind: schematype.FailureAbsence, Message: "the search ran and matched nothing"}
}
