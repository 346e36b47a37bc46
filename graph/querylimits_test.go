package graph_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
)

// introspectionQuery is GraphiQL's, with every option it can ask for.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    description
    queryType { name kind }
    mutationType { name kind }
    subscriptionType { name kind }
    types { ...FullType }
    directives {
      name description isRepeatable locations
      args(includeDeprecated: true) { ...InputValue }
    }
  }
}
fragment FullType on __Type {
  kind name description specifiedByURL isOneOf
  fields(includeDeprecated: true) {
    name description
    args(includeDeprecated: true) { ...InputValue }
    type { ...TypeRef }
    isDeprecated deprecationReason
  }
  inputFields(includeDeprecated: true) { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue {
  name description type { ...TypeRef } defaultValue isDeprecated deprecationReason
}
fragment TypeRef on __Type {
  kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType {
  kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } } }
}`

// fragmentBomb is the first attack of the issue: 31 fragments, each
// spreading the next twice, 2^30 spreads expanded, in 1.2 KB.
func fragmentBomb() string {
	var b strings.Builder
	b.WriteString("query{...F0}")
	for i := range 30 {
		fmt.Fprintf(&b, " fragment F%d on Query{...F%d ...F%d}", i, i+1, i+1)
	}
	b.WriteString(" fragment F30 on Query{viewer{name}}")
	return b.String()
}

// repeatedField is the second: one field asked for n times, which the
// validator compares pairwise.
func repeatedField(n int) string {
	return "{ viewer { " + strings.Repeat("name ", n) + "} }"
}

// aliases asks for the viewer's name under n names, each repeats times.
func aliases(n, repeats int) string {
	var b strings.Builder
	b.WriteString("{ viewer { ")
	for i := range n {
		for range repeats {
			fmt.Fprintf(&b, "a%d: name ", i)
		}
	}
	b.WriteString("} }")
	return b.String()
}

// fragments spreads n fragments of one field each in one selection set,
// which the validator compares two by two.
func fragments(n int) string {
	var b strings.Builder
	b.WriteString("{ viewer { ")
	for i := range n {
		fmt.Fprintf(&b, "...F%d ", i)
	}
	b.WriteString("} }")
	for i := range n {
		fmt.Fprintf(&b, " fragment F%d on User { name }", i)
	}
	return b.String()
}

// Queries past their bounds are refused before they are validated, with or
// without a token; the portal's queries pass.
func TestQueryLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	tok := b.alice.Token
	agentID := b.createAgent(t, tok, "Helper")
	conv := b.startConversation(t, tok, agentID, "limits")

	t.Run("the portal's queries pass", func(t *testing.T) {
		b.do(t, tok, transcriptQuery, map[string]any{"id": conv}).ok(t)
		data := b.do(t, tok, introspectionQuery, nil).ok(t)
		require.NotEmpty(t, get(data, "__schema", "types"))
		b.do(t, tok, aliases(graph.MaxQueryFields-1, 1), nil).ok(t) // viewer and n names
		b.do(t, tok, aliases((graph.MaxQueryFields-1)/graph.MaxQueryRepeats, graph.MaxQueryRepeats), nil).ok(t)
		b.do(t, tok, fragments(graph.MaxQuerySpreads), nil).ok(t)
	})

	deep := `{ __type(name: "User") { ` + strings.Repeat("ofType { ", graph.MaxQueryDepth) + "name" + strings.Repeat(" }", graph.MaxQueryDepth) + " } }"
	var spreads strings.Builder
	spreads.WriteString("{ ...A } fragment A on Query { ")
	spreads.WriteString(strings.Repeat("...B ", graph.MaxQuerySpreads))
	spreads.WriteString("} fragment B on Query { __typename }")
	tests := []struct {
		name    string
		give    string
		wantMsg string
	}{
		{name: "fragment bomb", give: fragmentBomb(), wantMsg: "query over 500 fields"},
		{name: "a field 20,000 times", give: repeatedField(20_000), wantMsg: "query over 32768 bytes"},
		{name: "a field 21 times", give: repeatedField(graph.MaxQueryRepeats + 1), wantMsg: `query asks for "name" over 20 times in one selection`},
		{name: "a field 21 times in inline fragments", give: "{ viewer { ... on User { " + strings.Repeat("name ", 11) + "} ... on User { " + strings.Repeat("name ", 10) + "} } }", wantMsg: `query asks for "name" over 20 times in one selection`},
		{name: "an alias 21 times", give: aliases(1, graph.MaxQueryRepeats+1), wantMsg: `query asks for "a0" over 20 times in one selection`},
		{name: "501 fields", give: aliases(graph.MaxQueryFields, 1), wantMsg: "query over 500 fields"},
		{name: "tokens", give: "{ viewer { name } " + strings.Repeat("__typename @skip(if: false) ", 1000) + "}", wantMsg: "query over 5000 tokens"},
		{name: "depth", give: deep, wantMsg: "query nested over 20 levels deep"},
		{name: "spreads", give: spreads.String(), wantMsg: "query over 100 fragment spreads"},
		{name: "fragments", give: fragments(graph.MaxQuerySpreads + 1), wantMsg: "query over 100 fragment spreads"},
		{name: "an unused fragment bomb", give: "{ viewer { name } } fragment G on Query { ...F0 } " + strings.TrimPrefix(fragmentBomb(), "query{...F0}"), wantMsg: "query over 500 fields"},
		{name: "a fragment defined twice", give: "{ ...F } fragment F on Query { __typename } fragment F on User { " + strings.Repeat("name ", 2000) + "}", wantMsg: `only one fragment named "F"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do(t, "", tt.give, nil)
			require.Equal(t, http.StatusUnauthorized, r.Status, "no token: refused before anything is parsed")
			require.Equal(t, "UNAUTHENTICATED", r.code(t))

			r = b.post(t, tok, "application/graphql-response+json", mustJSON(t, map[string]any{"query": tt.give}))
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			require.Contains(t, r.Errors[0].Message, tt.wantMsg)
			// Over GET too.
			req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/graphql?query="+urlQuery(tt.give), nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tok)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var got response
			require.NoError(t, json.NewDecoder(res.Body).Decode(&got))
			res.Body.Close()
			require.NotEmpty(t, got.Errors)
			require.Contains(t, got.Errors[0].Message, tt.wantMsg)
		})
	}
	t.Run("codes", func(t *testing.T) {
		r := b.do(t, tok, fragmentBomb(), nil)
		require.Equal(t, "QUERY_TOO_LARGE", r.code(t))
	})
}

// Introspection needs a token like everything else.
func TestIntrospectionNeedsAToken(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, dbtest.SQLite))
	for _, q := range []string{introspectionQuery, `{ __schema { types { name } } }`, `{ __type(name: "User") { name } }`} {
		r := b.do(t, "", q, nil)
		require.Equal(t, http.StatusUnauthorized, r.Status)
		require.Equal(t, "UNAUTHENTICATED", r.code(t))
		require.Equal(t, string(b.do(t, "", `{ viewer { name } }`, nil).Raw), string(r.Raw), "the same bytes as any refusal")
		b.do(t, b.alice.Token, q, nil).ok(t)
	}
}

// countingBody counts what the server reads of a request body.
type countingBody struct {
	r    io.Reader
	read *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (countingBody) Close() error { return nil }

// A body is not read before its token is checked: a caller without one
// cannot make the server take in a megabyte.
func TestBodyNotReadBeforeAuth(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	b := setup(t, d)
	srv := graph.NewServer(graph.Config{DB: d})
	body := `{"query": "{ viewer { name } }", "variables": {"pad": "` + strings.Repeat("x", graph.MaxBodyBytes-100) + `"}}`
	for name, token := range map[string]string{"no token": "", "bad token": "tg_forged", "live token": b.alice.Token} {
		var read atomic.Int64
		req := httptest.NewRequest(http.MethodPost, "/graphql", nil)
		req.Body = countingBody{r: strings.NewReader(body), read: &read}
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if token == b.alice.Token {
			require.Equal(t, http.StatusOK, w.Code, name)
			require.Equal(t, int64(len(body)), read.Load(), name)
			continue
		}
		require.Equal(t, http.StatusUnauthorized, w.Code, name)
		require.Zero(t, read.Load(), "%s: nothing of the body read", name)
	}
}

// BenchmarkQueryRefused measures the refusal of the two attacks,
// sent with a live token (without one they never get past the token), and
// for comparison the dearest queries accepted and GraphiQL's introspection.
func BenchmarkQueryRefused(b *testing.B) {
	d := dbtest.Open(b, dbtest.SQLite)
	tb := setup(b, d)
	srv := graph.NewServer(graph.Config{DB: d})
	for _, bm := range []struct {
		name  string
		query string
		code  int
	}{
		{name: "fragment bomb", query: fragmentBomb(), code: http.StatusBadRequest},
		{name: "a field 20,000 times", query: repeatedField(20_000), code: http.StatusBadRequest},
		{name: "accepted: 500 fields", query: aliases(graph.MaxQueryFields-1, 1), code: http.StatusOK},
		{name: "accepted: 24 fields 20 times each", query: aliases((graph.MaxQueryFields-1)/graph.MaxQueryRepeats, graph.MaxQueryRepeats), code: http.StatusOK},
		{name: "accepted: 100 fragments", query: fragments(graph.MaxQuerySpreads), code: http.StatusOK},
		{name: "introspection", query: introspectionQuery, code: http.StatusOK},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// A new text each time: nothing comes from the query cache.
				i++
				body := mustJSON(b, map[string]any{"query": fmt.Sprintf("%s # %d", bm.query, i)})
				req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/graphql-response+json")
				req.Header.Set("Authorization", "Bearer "+tb.alice.Token)
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != bm.code {
					b.Fatalf("status %d: %s", w.Code, w.Body.String())
				}
			}
		})
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

func urlQuery(s string) string {
	return strings.NewReplacer("%", "%25", " ", "%20", "{", "%7B", "}", "%7D", "#", "%23", "&", "%26", "+", "%2B", "\"", "%22", "\n", "%0A").Replace(s)
}
