package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
)

// callsModel answers a turn's first model call with calls calculator
// calls in one answer and the next, which carries their results, with its
// answer: streamed Chat Completions, as the provider speaks them.
// answered counts the answers.
func callsModel(t testing.TB, answered *atomic.Int64, calls int) string {
	var asked strings.Builder
	for i := range calls {
		if i > 0 {
			asked.WriteString(",")
		}
		fmt.Fprintf(&asked, `{"index":%d,"id":"c%d","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"%d+1\"}"}}`, i, i, i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Messages []json.RawMessage }
		_ = json.NewDecoder(r.Body).Decode(&req)
		last := ""
		if n := len(req.Messages); n > 0 {
			var m struct{ Role string }
			_ = json.Unmarshal(req.Messages[n-1], &m)
			last = m.Role
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if last == "tool" {
			fmt.Fprint(w, `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"stop","delta":{"role":"assistant","content":"It is 2."}}]}`+"\n\n")
		} else {
			fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"finish_reason":"tool_calls","delta":{"role":"assistant","tool_calls":[`+asked.String()+`]}}]}`+"\n\n")
		}
		fmt.Fprint(w, `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":3,"total_tokens":103}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
		if last == "tool" {
			answered.Add(1)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// oneCallModel is callsModel with one call.
func oneCallModel(t testing.TB, answered *atomic.Int64) string { return callsModel(t, answered, 1) }

// background is what a replica sends on its own timers whatever its turns
// do: the queue's leader election and maintenance, the sweep of abandoned
// turns. The idle count covers them (TestIdleStatements). River's poll for
// cancellation requests (JobGetCancelRequested) is on a ticker too, sent
// while a job runs: how many a turn meets depends on how long it runs (a
// loaded machine's ten-call turn met one), not on what it does.
var background = regexp.MustCompile("river_leader|river_queue|river_client|river_job_delete|river_job_rescue|river_job_schedule|" +
	"pg_try_advisory|LeaderAttempt|LeaderGetElected|QueueList|QueueDeleteExpired|JobGetStuck|JobGetCancelRequested|JobDeleteBefore|NotificationDeleteBefore|" +
	"^SELECT EXISTS \\(SELECT 1 FROM .?river_job.? WHERE state IN \\('retryable', 'scheduled'\\)|" +
	"^SELECT .turns.\\..id., .turns.\\..heartbeat_at. FROM .turns. WHERE .turns.\\..status. = [?$]1?$")

// TestTurnStatementsEndToEnd counts, from the drivers of both pools (the
// API's and the job queue's, pings included), every statement a warm turn
// causes, from sendMessage's request to the turn's job completed in the
// queue: the API request and its authentication, the budget check, the
// runtime's claim, load and records, the calculator's own GraphQL
// requests with their scope token, the event notifications and the
// queue's insert, fetch and completion. A turn of one call and one of ten
// calls in one answer. The bounds are today's, so a statement more fails;
// the breakdown is logged.
func TestTurnStatementsEndToEnd(t *testing.T) {
	// Today's counts. The fake model reports tokens, so each of the two
	// model calls costs something and adds to the month's running totals
	// (one statement each on SQLite; in the call's insert on PostgreSQL).
	// Bounded apart: PostgreSQL's event notifications, several events and
	// pieces to one, and its shared rate-limit window, written only for a
	// person's second request of a second on the replica (the warm turn's
	// sendMessage may fall in the same second).
	tests := []struct {
		calls int
		// most: a one-call turn's statements; ten calls', the transactions
		// and stored results left apart, bounded by most1Batched (a
		// one-call turn's) and perCall a call more (a record of each call
		// alone: SQLite's transaction and insert, PostgreSQL's statement).
		most, most1Batched map[dbtest.Backend]int
	}{
		{calls: 1, most: map[dbtest.Backend]int{dbtest.SQLite: 33, dbtest.Postgres: 18}},
		{calls: 10, most: map[dbtest.Backend]int{dbtest.SQLite: 29, dbtest.Postgres: 18},
			most1Batched: map[dbtest.Backend]int{dbtest.SQLite: 13, dbtest.Postgres: 3}},
	}
	for _, backend := range []dbtest.Backend{dbtest.SQLite, dbtest.Postgres} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%d", backend, tt.calls), func(t *testing.T) {
				var answered atomic.Int64
				s := startServer(t, backend, callsModel(t, &answered, tt.calls))
				agent := s.gql(t, `mutation { createAgent(input: {name: "Sums", instructions: "Add.", tools: []}) { id } }`, nil)
				c := s.gql(t, `mutation($a: ID!) { startConversation(input: {agentId: $a}) { id } }`, map[string]any{"a": agent["createAgent"].(map[string]any)["id"]})
				conv := c["startConversation"].(map[string]any)["id"]
				var took time.Duration
				turn := func() (int, string) {
					before := answered.Load()
					s.stmts.reset()
					start := time.Now()
					s.gql(t, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "1+1?"}) { id } }`, map[string]any{"c": conv})
					require.Eventually(t, func() bool { return answered.Load() > before }, 20*time.Second, time.Millisecond)
					took = time.Since(start)
					// The turn's end, its events and its job's completion
					// follow the answer: until the statements stop.
					last, quiet := -1, 0
					for quiet < 20 {
						time.Sleep(25 * time.Millisecond)
						n, _ := s.stmts.total()
						if n == last {
							quiet++
							continue
						}
						last, quiet = n, 0
					}
					return s.stmts.counted(background)
				}
				turn() // warms the caches
				n, list := turn()
				notes, windows, batched := s.stmts.matching(notifications), s.stmts.matching(rateWindows), s.stmts.matching(recordBatches)
				t.Logf("%s: %d statements (%d of them event notifications, %d rate-limit windows, %d transactions and stored results), %d-call turn end to end:\n%s",
					backend, n, notes, windows, batched, tt.calls, list)
				// Events go within a few milliseconds, a step's together, in
				// order: how many notifications depends on how closely they
				// follow each other (2 on a quiet machine).
				require.LessOrEqual(t, notes, 6+2*tt.calls, "%s\n%s", took, list)
				require.LessOrEqual(t, windows, 1, list)
				if tt.calls == 1 {
					require.LessOrEqual(t, n-notes-windows, tt.most[backend], list)
					return
				}
				// How many transactions the records of ten calls take depends
				// on how closely the calls finish: bounded at the worst (each
				// call's record alone), the rest exactly.
				require.LessOrEqual(t, n-notes-windows-batched, tt.most[backend], list)
				require.LessOrEqual(t, batched, tt.most1Batched[backend]+perCall[backend]*(tt.calls-1), list)
			})
		}
	}
}

// notifications are the turn events' notifications to other replicas.
var notifications = regexp.MustCompile(`^SELECT pg_notify\(`)

// recordBatches are the statements whose number depends on how the
// records of a step's calls are batched: the transactions of the API's
// pool (BEGIN and COMMIT; the queue's pgx ones are lower-case) and the
// stored results' inserts; on PostgreSQL, each batch's one statement.
var recordBatches = regexp.MustCompile(`^(BEGIN|COMMIT|INSERT INTO .stored_results.|WITH "held" AS)`)

// perCall is how many recordBatches statements a call's record alone
// takes: SQLite's BEGIN, insert and COMMIT; PostgreSQL's one statement.
var perCall = map[dbtest.Backend]int{dbtest.SQLite: 3, dbtest.Postgres: 1}

// rateWindows are the writes of PostgreSQL's shared rate-limit windows.
var rateWindows = regexp.MustCompile(`^INSERT INTO toolgate_rate_windows`)

// matching counts the statements sent that re matches.
func (s *statements) matching(re *regexp.Regexp) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for q, c := range s.n {
		if re.MatchString(q) {
			n += c
		}
	}
	return n
}

// counted returns how many statements were sent that background does not
// match, and all of them by frequency.
func (s *statements) counted(background *regexp.Regexp) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	var qs []string
	for q, c := range s.n {
		if !background.MatchString(q) {
			n += c
		}
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return s.n[qs[i]] > s.n[qs[j]] || s.n[qs[i]] == s.n[qs[j]] && qs[i] < qs[j] })
	var b strings.Builder
	for _, q := range qs {
		mark := " "
		if background.MatchString(q) {
			mark = "b"
		}
		fmt.Fprintf(&b, "%s%4d  %.160s\n", mark, s.n[q], q)
	}
	return n, b.String()
}
