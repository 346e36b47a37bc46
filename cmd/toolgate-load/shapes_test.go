package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// TestShapesAreWrittenTwice wants every shape's two documents to parse,
// PostGraphile's to take the conversation's id as the BigInt it is there,
// and the shapes the issue names all present.
func TestShapesAreWrittenTwice(t *testing.T) {
	var names []string
	for _, s := range shapes() {
		names = append(names, s.name)
		for _, doc := range []string{s.toolgate, s.postgraphile} {
			_, err := parser.ParseQuery(&ast.Source{Input: doc})
			require.NoError(t, err, "%s: %s", s.name, doc)
		}
		require.Contains(t, s.postgraphile, "$id: BigInt!", s.name)
		require.Contains(t, s.postgraphile, "conversationById", s.name)
		require.NotEmpty(t, s.floor.conversation, s.name)
		require.Contains(t, s.floor.turns, "LIMIT 101", s.name)
	}
	require.Equal(t, []string{"console", "no-orderBy", "last-100", "number-desc", "updatedAt", "fragments"}, names)
}

// TestPrintShapes prints made-up rows and wants each shape's table, its
// ratios, and the verdicts: a shape under 2 × PostGraphile at either
// concurrency or over 2 × plain SQL's p50 at 1 client misses; p50 at 8 is
// shown and not held to the goal.
func TestPrintShapes(t *testing.T) {
	ms := time.Millisecond
	rows := func(tg1, pg1, tg8, pg8 float64, p50, sqlP50 time.Duration) []row {
		return []row{
			{name: byToolgate, clients: 1, requests: 10, perSecond: tg1, p50: p50, p99: 2 * p50},
			{name: byPostgraphile, clients: 1, requests: 10, perSecond: pg1, p50: 20 * ms, p99: 40 * ms},
			{name: bySQL, clients: 1, requests: 10, perSecond: 300, p50: sqlP50, p99: 2 * sqlP50},
			{name: byToolgate, clients: 8, requests: 10, perSecond: tg8, p50: 50 * ms, p99: 90 * ms},
			{name: byPostgraphile, clients: 8, requests: 10, perSecond: pg8, p50: 90 * ms, p99: 200 * ms},
			{name: bySQL, clients: 8, requests: 10, perSecond: 500, p50: 5 * ms, p99: 9 * ms},
		}
	}
	all := shapes()
	results := []shapeResult{
		{shape: all[0], rows: rows(120, 30, 200, 50, 6*ms, 3*ms)},
		{shape: all[1], rows: rows(120, 70, 200, 50, 6*ms, 3*ms)},
		{shape: all[2], rows: rows(120, 30, 200, 50, 9*ms, 3*ms)},
		{shape: all[3], rows: rows(120, 30, 200, 50, 6*ms, 3*ms)[:3]},
	}
	var out bytes.Buffer
	require.NoError(t, printShapes(&out, results, []int{1, 8}))
	got := out.String()
	require.Contains(t, got, "shape console: the admin console's transcript")
	require.Regexp(t, `(?m)^ +PostGraphile +8 +10 +50\.0 +90\.00 ms +200\.00 ms +0$`, got)
	require.Contains(t, got, "at 1: toolgate ÷ PostGraphile req/s 4.00×, toolgate p50 ÷ plain SQL p50 2.00×")
	require.Contains(t, got, "at 8: toolgate ÷ PostGraphile req/s 4.00×, toolgate p50 ÷ plain SQL p50 10.00×")
	require.Regexp(t, `(?m)^ +console +4\.00× +2\.00× +4\.00× +10\.00× +met$`, got)
	require.Regexp(t, `(?m)^ +no-orderBy +1\.71× +2\.00× +4\.00× +10\.00× +missed: req/s at 1$`, got)
	require.Regexp(t, `(?m)^ +last-100 +4\.00× +3\.00× +4\.00× +10\.00× +missed: p50 at 1$`, got)
	require.Regexp(t, `(?m)^ +number-desc +4\.00× +2\.00× +— +— +met$`, got)
}

func TestMedians(t *testing.T) {
	ms := time.Millisecond
	got := medians([][]row{
		{{name: byToolgate, clients: 1, requests: 5, perSecond: 100, p50: 3 * ms, p99: 9 * ms}},
		{{name: byToolgate, clients: 1, requests: 7, perSecond: 50, p50: 5 * ms, p99: 7 * ms, errors: 1}},
		{{name: byToolgate, clients: 1, requests: 6, perSecond: 80, p50: 4 * ms, p99: 8 * ms}},
	})
	require.Equal(t, []row{{name: byToolgate, clients: 1, requests: 18, errors: 1, perSecond: 80, p50: 4 * ms, p99: 8 * ms}}, got)
}

func TestSameRows(t *testing.T) {
	ours := []byte(`{"turns":[{"number":1,"toolCalls":[{"outcome":"HITS"}]},{"number":2,"toolCalls":[]}]}`)
	require.NoError(t, sameRows(ours, []byte(`{"turns":[{"number":"1","toolCalls":[{"outcome":"HITS"}]},{"number":"2","toolCalls":[]}]}`)))
	require.EqualError(t, sameRows(ours, []byte(`{"turns":[{"number":"1","toolCalls":[{"outcome":"HITS"}]}]}`)), `"number": 2 times against 1`)
	require.EqualError(t, sameRows([]byte(`{}`), []byte(`{}`)), "no turns")
}

// TestShapesReadsEveryShape reads a seeded transcript in every shape
// through a real server and with plain SQL, briefly, PostGraphile left out,
// and wants a table per shape with no errors and the ratios it can give.
func TestShapesReadsEveryShape(t *testing.T) {
	url, api, token, conv := serve(t)

	var out bytes.Buffer
	require.NoError(t, run([]string{"-shapes", "-url", api, "-token", token, "-conversation", conv,
		"-clients", "1", "-duration", "300ms", "-warmup", "50ms", "-database-url", url}, &out))
	got := out.String()
	for _, s := range shapes() {
		require.Contains(t, got, "shape "+s.name+": ")
		require.Regexp(t, `(?m)^ +`+s.name+` +— +[0-9.]+× +(met|missed: p50 at 1)$`, got)
	}
	for _, by := range []string{byToolgate, bySQL} {
		rows := regexp.MustCompile(`(?m)^ +` + by + ` +1 +[1-9][0-9]* +[0-9.]+ +[0-9.]+ ms +[0-9.]+ ms +0$`)
		require.Len(t, rows.FindAllString(got, -1), len(shapes()), got)
	}
	require.NotRegexp(t, `(?m)^ +`+byPostgraphile+` +1 `, got)
	require.NotContains(t, got, "first error")
}
