package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/graph/console"
	"github.com/toolgate/toolgate/graph/gid"
)

// shape is one way a client reads a conversation's transcript, written
// three times over the same rows: toolgate's document, PostGraphile 4's
// (its default inflection over toolgate's tables, nested lists as
// --simple-collections both gives them, aliased to toolgate's names so
// that both answers have one shape), and the statements of plain SQL.
type shape struct {
	name, what   string
	toolgate     string
	postgraphile string
	floor        floor
}

// floor is the plain SQL of a shape: the conversation's row, the page of
// turns (their id first: the statements after it take the page's ids as
// their one argument), and what hangs off the turns.
type floor struct {
	conversation, turns string
	perTurns            []string
}

// The columns the portal's shapes select, beside the console's.
const (
	shapeConversation = `SELECT id, title, created_at FROM conversations WHERE id = $1`
	shapeTurns        = `SELECT id, number, status, user_text, answer, started_at, finished_at FROM turns WHERE conversation_id = $1`
	shapeToolCalls    = `SELECT t.id, t.turn_id, t.name, t.outcome, t.arguments, r.ref, r.kind, r.chars
FROM tool_calls t LEFT JOIN stored_results r ON r.id = t.result_id WHERE t.turn_id = ANY($1) ORDER BY t.turn_id, t.position`
	forward  = ` ORDER BY number, id LIMIT 101`
	backward = ` ORDER BY number DESC, id DESC LIMIT 101`
)

// consoleFloor is what the console's transcript shows of a conversation,
// its first 100 turns, their tool calls with their results' metadata, and
// their model calls.
var consoleFloor = floor{conversation: conversationRow, turns: turnRows, perTurns: []string{toolCallRows, modelCallRows}}

// portalTurn is the fields of a turn the portal's shapes select in both
// servers' documents; toolgate's and PostGraphile's names are the same.
const portalTurn = `id number status userText answer startedAt finishedAt`

// shapes are the transcript reads measured side by side: the console's,
// and a portal's the ways a portal writes them (the shapes of
// graph/transcript_bench_test.go, and newest first).
func shapes() []shape {
	tgTurns := func(args, page string) string {
		return `query($id: ID!) { conversation(id: $id) { id title createdAt turns(` + args + `) { pageInfo { ` + page + ` }
  edges { node { ` + portalTurn + ` toolCalls { id name outcome arguments result { ref kind chars } } } } } } }`
	}
	pgTurns := func(args, page string) string {
		return `query($id: BigInt!) { conversation: conversationById(id: $id) { id title createdAt turns: turnsByConversationId(` + args + `) { pageInfo { ` + page + ` }
  edges { node { ` + portalTurn + ` toolCalls: toolCallsByTurnIdList(orderBy: [POSITION_ASC]) { id name outcome arguments result: storedResultByResultId { ref kind chars } } } } } } }`
	}
	portal := func(order string) floor {
		return floor{conversation: shapeConversation, turns: shapeTurns + order, perTurns: []string{shapeToolCalls}}
	}
	return []shape{
		{
			name: "console", what: "the admin console's transcript: every field, orderBy NUMBER ASC written out, model calls",
			toolgate: console.Operations()["transcript"],
			postgraphile: `query($id: BigInt!, $first: Int) { conversation: conversationById(id: $id) {
  id title createdAt turnsCount
  user: userByUserId { id name department }
  agent: agentByAgentId { id name }
  turns: turnsByConversationId(first: $first, orderBy: [NUMBER_ASC]) {
    pageInfo { hasNextPage endCursor }
    edges { node {
      id number status startedAt finishedAt timeZone userText answer error replayed superseded
      modelCalls: modelCallsByTurnIdList(orderBy: [STEP_ASC]) { step kind model durationMs inputTokens cacheReadTokens cacheWriteTokens outputTokens costMicros prefixTokens }
      toolCalls: toolCallsByTurnIdList(orderBy: [POSITION_ASC]) {
        id position name arguments outcome attempts message ref guardrail startedAt finishedAt failures
        result: storedResultByResultId { ref kind chars bytes items truncatedAtSource createdAt }
      }
    } }
  }
} }`,
			floor: consoleFloor,
		},
		{
			name: "no-orderBy", what: "turns(first: 100), no orderBy",
			toolgate:     tgTurns("first: 100", "hasNextPage endCursor"),
			postgraphile: pgTurns("first: 100", "hasNextPage endCursor"),
			floor:        portal(forward),
		},
		{
			name: "last-100", what: "turns(last: 100), backward",
			toolgate:     tgTurns("last: 100", "hasPreviousPage startCursor"),
			postgraphile: pgTurns("last: 100", "hasPreviousPage startCursor"),
			floor:        portal(backward),
		},
		{
			name: "number-desc", what: "turns(first: 100, orderBy NUMBER DESC), newest first",
			toolgate:     tgTurns("first: 100, orderBy: [{field: NUMBER, direction: DESC}]", "hasNextPage endCursor"),
			postgraphile: pgTurns("first: 100, orderBy: [NUMBER_DESC]", "hasNextPage endCursor"),
			floor:        portal(backward),
		},
		{
			name: "updatedAt", what: "one more field (the conversation's updatedAt), orderBy NUMBER ASC",
			toolgate: `query($id: ID!) { conversation(id: $id) { id title createdAt updatedAt turns(first: 100, orderBy: [{field: NUMBER, direction: ASC}]) {
  edges { node { id number status userText answer toolCalls { id name outcome arguments result { ref kind chars } } } } } } }`,
			postgraphile: `query($id: BigInt!) { conversation: conversationById(id: $id) { id title createdAt updatedAt turns: turnsByConversationId(first: 100, orderBy: [NUMBER_ASC]) {
  edges { node { id number status userText answer toolCalls: toolCallsByTurnIdList(orderBy: [POSITION_ASC]) { id name outcome arguments result: storedResultByResultId { ref kind chars } } } } } } }`,
			floor: floor{
				conversation: `SELECT id, title, created_at, updated_at FROM conversations WHERE id = $1`,
				turns:        `SELECT id, number, status, user_text, answer FROM turns WHERE conversation_id = $1` + forward,
				perTurns:     []string{shapeToolCalls},
			},
		},
		{
			name: "fragments", what: "fragments named and inline, aliases, __typename, cursors, model calls",
			toolgate: `query($id: ID!) { conversation(id: $id) { ...C turns(first: 100) { edges { cursor node { ...T } } } } }
fragment C on Conversation { id title updatedAt }
fragment T on Turn { id number s: status userText answer ... on Turn { toolCalls { ...TC } modelCalls { model inputTokens outputTokens } } }
fragment TC on ToolCall { __typename id name outcome result { id ref kind chars bytes } }`,
			postgraphile: `query($id: BigInt!) { conversation: conversationById(id: $id) { ...C turns: turnsByConversationId(first: 100) { edges { cursor node { ...T } } } } }
fragment C on Conversation { id title updatedAt }
fragment T on Turn { id number s: status userText answer ... on Turn {
  toolCalls: toolCallsByTurnIdList(orderBy: [POSITION_ASC]) { ...TC } modelCalls: modelCallsByTurnIdList(orderBy: [STEP_ASC]) { model inputTokens outputTokens } } }
fragment TC on ToolCall { __typename id name outcome result: storedResultByResultId { id ref kind chars bytes } }`,
			floor: floor{
				conversation: `SELECT id, title, updated_at FROM conversations WHERE id = $1`,
				turns:        `SELECT id, number, status, user_text, answer FROM turns WHERE conversation_id = $1` + forward,
				perTurns: []string{
					`SELECT t.id, t.turn_id, t.name, t.outcome, r.id, r.ref, r.kind, r.chars, r.bytes
FROM tool_calls t LEFT JOIN stored_results r ON r.id = t.result_id WHERE t.turn_id = ANY($1) ORDER BY t.turn_id, t.position`,
					`SELECT turn_id, step, model, input_tokens, output_tokens FROM model_calls WHERE turn_id = ANY($1) ORDER BY turn_id, step`,
				},
			},
		},
	}
}

// Who a row of a shape's table measures.
const (
	byToolgate     = "toolgate"
	byPostgraphile = "PostGraphile"
	bySQL          = "plain SQL"
)

// The goal each shape is held to: toolgate at least twice PostGraphile's
// requests a second at every concurrency, and its p50 at 1 client at most
// twice plain SQL's (with more clients than cores, p50 is mostly the wait
// for a core, so it is shown there but not held to the goal).
const (
	goalOverPostgraphile = 2.0
	goalOverSQL          = 2.0
)

// measureShapes reads the conversation in every shape from toolgate, from
// PostGraphile on the same tables (-postgraphile-url) and with plain SQL
// (-database-url), at each of -clients, for -rounds rounds, each row of a
// round right after the others of its concurrency, and prints a table per
// shape of the rows' medians over the rounds, then the ratios of all.
func measureShapes(ctx context.Context, c *client, o options, stdout io.Writer) error {
	if o.conversation == "" {
		agent := o.agent
		if agent == "" {
			var err error
			if agent, err = c.createAgent(ctx); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "seeding a conversation of %d turns...\n", o.seedTurns)
		id, err := c.seed(ctx, agent, o.seedTurns)
		if err != nil {
			return err
		}
		o.conversation = id
		fmt.Fprintf(os.Stderr, "conversation %s\n", id)
	}
	convID, err := gid.Decode(o.conversation)
	if err != nil {
		return fmt.Errorf("-conversation: %w", err)
	}
	var pg *client
	if o.postgraphileURL != "" {
		pg = newClient(o.postgraphileURL, "", slices.Max(o.clients))
	}
	var db *sql.DB
	if o.databaseURL != "" {
		if db, err = sql.Open("postgres", o.databaseURL); err != nil {
			return err
		}
		defer db.Close()
		db.SetMaxIdleConns(slices.Max(o.clients))
		// The planner's statistics of the rows just seeded: PostgreSQL's
		// autovacuum gathers them once that many rows change, within its
		// naptime (a minute), but a server may run with it off, and every
		// reader's plans (toolgate's, PostGraphile's, plain SQL's) would
		// then be chosen for empty tables.
		if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
			return fmt.Errorf("analyze the seeded tables: %w", err)
		}
	}
	type target struct {
		by   string
		read func(context.Context) error
	}
	all := shapes()
	targets := make([][]target, len(all))
	for i, s := range all {
		tg, err := json.Marshal(map[string]any{"query": s.toolgate, "variables": map[string]any{"id": o.conversation, "first": 100}})
		if err != nil {
			return err
		}
		answer, err := c.fetch(ctx, tg)
		if err != nil {
			return fmt.Errorf("%s, toolgate: %w", s.name, err)
		}
		targets[i] = append(targets[i], target{byToolgate, func(ctx context.Context) error { return c.post(ctx, tg, nil) }})
		if pg != nil {
			body, err := json.Marshal(map[string]any{"query": s.postgraphile, "variables": map[string]any{"id": fmt.Sprint(convID), "first": 100}})
			if err != nil {
				return err
			}
			theirs, err := pg.fetch(ctx, body)
			if err != nil {
				return fmt.Errorf("%s, PostGraphile: %w", s.name, err)
			}
			if err := sameRows(answer, theirs); err != nil {
				return fmt.Errorf("%s: toolgate and PostGraphile answer different rows: %w", s.name, err)
			}
			targets[i] = append(targets[i], target{byPostgraphile, func(ctx context.Context) error { return pg.post(ctx, body, nil) }})
		}
		if db != nil {
			f := s.floor
			if err := readRows(ctx, db, f, convID); err != nil {
				return fmt.Errorf("%s, plain SQL: %w", s.name, err)
			}
			targets[i] = append(targets[i], target{bySQL, func(ctx context.Context) error { return readRows(ctx, db, f, convID) }})
		}
	}
	rounds := make([][][]row, len(all)) // shape, round, rows
	for round := range o.rounds {
		for i, s := range all {
			var rows []row
			for _, n := range o.clients {
				for _, t := range targets[i] {
					name := fmt.Sprintf("%s (round %d/%d) %s", s.name, round+1, o.rounds, t.by)
					r := load(ctx, name, n, o, func(int) func(context.Context) error { return t.read })
					r.name = t.by
					rows = append(rows, r)
				}
			}
			rounds[i] = append(rounds[i], rows)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	results := make([]shapeResult, len(all))
	for i, s := range all {
		results[i] = shapeResult{shape: s, rows: medians(rounds[i])}
	}
	return printShapes(stdout, results, o.clients)
}

// sameRows fails when two answers of one shape do not hold as many turns
// and tool calls: the documents read different rows.
func sameRows(ours, theirs []byte) error {
	for _, key := range []string{`"number":`, `"outcome":`, `"model":`} {
		a, b := bytes.Count(ours, []byte(key)), bytes.Count(theirs, []byte(key))
		if a != b {
			return fmt.Errorf("%s %d times against %d", key, a, b)
		}
	}
	if !bytes.Contains(ours, []byte(`"number":`)) {
		return errors.New("no turns")
	}
	return nil
}

// medians is the rows of several rounds, each row's figures the median of
// that row's over the rounds (the rounds' rows are in the same order).
func medians(rounds [][]row) []row {
	if len(rounds) == 0 {
		return nil
	}
	out := slices.Clone(rounds[0])
	for j := range out {
		var rps []float64
		var p50, p99 []time.Duration
		out[j].requests, out[j].errors, out[j].firstErr = 0, 0, nil
		for _, rows := range rounds {
			r := rows[j]
			rps = append(rps, r.perSecond)
			p50 = append(p50, r.p50)
			p99 = append(p99, r.p99)
			out[j].requests += r.requests
			out[j].errors += r.errors
			if out[j].firstErr == nil {
				out[j].firstErr = r.firstErr
			}
		}
		out[j].perSecond, out[j].p50, out[j].p99 = median(rps), median(p50), median(p99)
	}
	return out
}

func median[T time.Duration | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// shapeResult is a shape's rows: for each concurrency, toolgate's, then
// PostGraphile's and plain SQL's when measured.
type shapeResult struct {
	shape shape
	rows  []row
}

// find is the row of who at n clients, or nil.
func (s shapeResult) find(by string, n int) *row {
	for i := range s.rows {
		if s.rows[i].name == by && s.rows[i].clients == n {
			return &s.rows[i]
		}
	}
	return nil
}

// ratios are toolgate's requests a second over PostGraphile's, and its p50
// over plain SQL's, at n clients; 0 for one not measured.
func (s shapeResult) ratios(n int) (overPostgraphile, overSQL float64) {
	tg := s.find(byToolgate, n)
	if tg == nil {
		return 0, 0
	}
	if pg := s.find(byPostgraphile, n); pg != nil && pg.perSecond > 0 {
		overPostgraphile = tg.perSecond / pg.perSecond
	}
	if db := s.find(bySQL, n); db != nil && db.p50 > 0 {
		overSQL = float64(tg.p50) / float64(db.p50)
	}
	return overPostgraphile, overSQL
}

// printShapes prints a table per shape, then one line a shape of its
// ratios at each concurrency, and which miss the goal. A table's requests
// are all its rounds'.
func printShapes(w io.Writer, results []shapeResult, clients []int) error {
	for _, s := range results {
		fmt.Fprintf(w, "shape %s: %s\n", s.shape.name, s.shape.what)
		if err := print(w, s.rows); err != nil {
			return err
		}
		for _, n := range clients {
			pg, db := s.ratios(n)
			fmt.Fprintf(w, "  at %d: toolgate ÷ PostGraphile req/s %s, toolgate p50 ÷ plain SQL p50 %s\n", n, times(pg), times(db))
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "shape\t")
	for _, n := range clients {
		fmt.Fprintf(tw, "÷ PostGraphile at %d\tp50 ÷ SQL at %d\t", n, n)
	}
	fmt.Fprintln(tw, "goal\t")
	for _, s := range results {
		fmt.Fprintf(tw, "%s\t", s.shape.name)
		var misses []string
		for _, n := range clients {
			pg, db := s.ratios(n)
			fmt.Fprintf(tw, "%s\t%s\t", times(pg), times(db))
			if pg != 0 && pg < goalOverPostgraphile {
				misses = append(misses, fmt.Sprintf("req/s at %d", n))
			}
			if n == 1 && db != 0 && db > goalOverSQL {
				misses = append(misses, fmt.Sprintf("p50 at %d", n))
			}
		}
		verdict := "met"
		if len(misses) > 0 {
			verdict = "missed: " + strings.Join(misses, ", ")
		}
		fmt.Fprintf(tw, "%s\t\n", verdict)
	}
	return tw.Flush()
}

// times writes a ratio, or a dash for one not measured.
func times(r float64) string {
	if r == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", r)
}
