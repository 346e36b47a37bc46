// Command toolgate-load measures a running toolgate server: a portal's
// transcript read at 1, 8 and 32 concurrent clients, and whole turns (sent,
// run by the server's model, followed to their end) at 1 and 8, and prints
// requests per second, p50 and p99 latency and errors for each.
//
// It is a program of its own, not a command of the server's binary: it only
// speaks HTTP and WebSocket to the API, so it runs from any machine against
// any server, and the server does not carry a load generator.
//
// It needs a token (TOOLGATE_TOKEN or -token). Without -conversation it
// seeds one: an agent offered the calculator, and -seed-turns turns through
// sendMessage. With the server's replay model playing the script that
// -print-replay prints, each turn makes 5 calculator calls, each with a
// stored result: the transcript the figures are measured on.
//
//	toolgate-load -print-replay > load-replay.json
//	toolgate serve --demo --replay-script load-replay.json
//	TOOLGATE_TOKEN=... toolgate-load
//
// -query and -vars send another document (another server's schema, say,
// for a side-by-side comparison) for the transcript read; -database-url
// adds the same rows read with plain SQL as a floor. -shapes reads the
// transcript in each of the shapes a client writes (shapes.go) from
// toolgate, from PostGraphile 4 over the same tables (-postgraphile-url)
// and with plain SQL, and prints a table per shape with the ratios the
// goal is stated in. Every run is bounded by -duration per row and stops
// by itself.
package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/coder/websocket"
	"github.com/lib/pq"

	"github.com/toolgate/toolgate/graph/console"
	"github.com/toolgate/toolgate/graph/gid"
)

// replayScript makes every turn 5 calculator calls in one step, then an
// answer: a turn of the size the transcript figures are measured on.
const replayScript = `{
  "entries": [
    {"match": "", "steps": [
      {"text": "Working it out.", "toolCalls": [
        {"name": "calculator", "arguments": {"expression": "1200 + 850"}},
        {"name": "calculator", "arguments": {"expression": "2050 * 1.2"}},
        {"name": "calculator", "arguments": {"expression": "2460 / 12"}},
        {"name": "calculator", "arguments": {"expression": "205 * 3"}},
        {"name": "calculator", "arguments": {"expression": "2460 - 615"}}
      ]},
      {"text": "The total is 2,460: 205 a month, 615 a quarter, 1,845 after the first quarter."}
    ]}
  ]
}
`

type options struct {
	url, token, conversation, agent string
	query, vars, databaseURL        string
	clients, turnClients            []int
	seedTurns                       int
	duration, warmup                time.Duration
	// team: readers and writers at once (team.go) instead of the table.
	team             bool
	readers, writers int
	metricsURL       string
	serverPID        int
	// shapes: the transcript's shapes side by side (shapes.go) instead of
	// the table.
	shapes          bool
	postgraphileURL string
	rounds          int
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "toolgate-load:", err)
		}
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("toolgate-load", flag.ContinueOnError)
	var o options
	var clients, turnClients string
	printReplay := fs.Bool("print-replay", false, "print the replay script the server's model should play (5 calculator calls a turn) and exit")
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080/graphql", "the GraphQL endpoint")
	fs.StringVar(&o.token, "token", os.Getenv("TOOLGATE_TOKEN"), "API token (env TOOLGATE_TOKEN); none for a server that needs none")
	fs.StringVar(&o.conversation, "conversation", "", "conversation to read (its id); default: seed one")
	fs.StringVar(&o.agent, "agent", "", "agent the seeded conversations talk to; default: create one offered the calculator")
	fs.IntVar(&o.seedTurns, "seed-turns", 100, "turns of the seeded conversation")
	fs.StringVar(&clients, "clients", "1,8,32", "concurrent clients of the transcript read")
	fs.StringVar(&turnClients, "turn-clients", "1,8", "concurrent turns, each in its own conversation; empty: none")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each row runs")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each row")
	fs.StringVar(&o.query, "query", "", "file of another GraphQL document for the transcript read (default: the console's)")
	fs.StringVar(&o.vars, "vars", "", `its variables, JSON (default: {"id": <conversation>, "first": 100})`)
	fs.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL URL of the server's database: adds the transcript's rows read with plain SQL")
	fs.BoolVar(&o.team, "team", false, "a team's load instead of the table: -readers reading the transcript and -writers running turns, all at once, for -duration (60s unless given)")
	fs.IntVar(&o.readers, "readers", 200, "with -team: concurrent transcript readers")
	fs.IntVar(&o.writers, "writers", 20, "with -team: concurrent writers, each running turns in a conversation of its own")
	fs.StringVar(&o.metricsURL, "metrics-url", "", "with -team: the server's Prometheus endpoint, for its CPU (default: -url's /metrics)")
	fs.IntVar(&o.serverPID, "server-pid", 0, "with -team: the server's process id on this machine, for its CPU from /proc instead of /metrics")
	fs.BoolVar(&o.shapes, "shapes", false, "the transcript read in each of its shapes instead of the table: toolgate, PostGraphile (-postgraphile-url) and plain SQL (-database-url) side by side at -clients (1,8 unless given), a table per shape and their ratios")
	fs.StringVar(&o.postgraphileURL, "postgraphile-url", "", "with -shapes: the GraphQL endpoint of PostGraphile 4 serving the same database")
	fs.IntVar(&o.rounds, "rounds", 1, "with -shapes: rounds of every row, interleaved; each figure is the median of its rounds'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.team {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["duration"] {
			o.duration = time.Minute
		}
		if o.readers < 0 || o.writers < 0 || o.readers+o.writers == 0 {
			return errors.New("-team: -readers and -writers are counts, not both 0")
		}
	}
	if o.shapes {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["clients"] {
			clients = "1,8"
		}
		if o.rounds < 1 {
			return errors.New("-rounds: at least 1")
		}
	}
	if *printReplay {
		_, err := io.WriteString(stdout, replayScript)
		return err
	}
	var err error
	if o.clients, err = ints(clients); err != nil {
		return fmt.Errorf("-clients: %w", err)
	}
	if o.turnClients, err = ints(turnClients); err != nil {
		return fmt.Errorf("-turn-clients: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if o.shapes {
		if len(o.clients) == 0 {
			return errors.New("-shapes: -clients names none")
		}
		return measureShapes(ctx, newClient(o.url, o.token, slices.Max(o.clients)), o, stdout)
	}
	if o.team {
		return team(ctx, newClient(o.url, o.token, o.readers+2*o.writers), o, stdout)
	}
	c := newClient(o.url, o.token, slices.Max(append([]int{1}, append(o.clients, o.turnClients...)...)))
	return measure(ctx, c, o, stdout)
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a count of clients", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func measure(ctx context.Context, c *client, o options, stdout io.Writer) error {
	needAgent := o.conversation == "" || len(o.turnClients) > 0
	if needAgent && o.agent == "" && o.query == "" {
		id, err := c.createAgent(ctx)
		if err != nil {
			return err
		}
		o.agent = id
	}
	if o.conversation == "" && o.query == "" {
		fmt.Fprintf(os.Stderr, "seeding a conversation of %d turns...\n", o.seedTurns)
		id, err := c.seed(ctx, o.agent, o.seedTurns)
		if err != nil {
			return err
		}
		o.conversation = id
		fmt.Fprintf(os.Stderr, "conversation %s\n", id)
	}
	body, err := transcriptBody(o)
	if err != nil {
		return err
	}
	read := func(ctx context.Context) error { return c.post(ctx, body, nil) }
	if err := read(ctx); err != nil {
		return fmt.Errorf("transcript read: %w", err)
	}
	var rows []row
	for _, n := range o.clients {
		rows = append(rows, load(ctx, "transcript", n, o, func(int) func(context.Context) error { return read }))
	}
	if o.databaseURL != "" && o.conversation != "" {
		db, err := sql.Open("postgres", o.databaseURL)
		if err != nil {
			return err
		}
		defer db.Close()
		db.SetMaxIdleConns(slices.Max(o.clients))
		convID, err := gid.Decode(o.conversation)
		if err != nil {
			return fmt.Errorf("-database-url: %w", err)
		}
		for _, n := range o.clients {
			rows = append(rows, load(ctx, "same rows, plain SQL", n, o, func(int) func(context.Context) error {
				return func(ctx context.Context) error { return readRows(ctx, db, consoleFloor, convID) }
			}))
		}
	}
	for _, n := range o.turnClients {
		if o.query != "" {
			break
		}
		convs := make([]string, n)
		for i := range convs {
			if convs[i], err = c.startConversation(ctx, o.agent); err != nil {
				return err
			}
		}
		rows = append(rows, load(ctx, "turn", n, o, func(i int) func(context.Context) error {
			return func(ctx context.Context) error { return c.turn(ctx, convs[i]) }
		}))
	}
	return print(stdout, rows)
}

func transcriptBody(o options) ([]byte, error) {
	query := console.Operations()["transcript"]
	vars := map[string]any{"id": o.conversation, "first": 100}
	if o.query != "" {
		b, err := os.ReadFile(o.query)
		if err != nil {
			return nil, err
		}
		query = string(b)
	}
	if o.vars != "" {
		vars = nil
		if err := json.Unmarshal([]byte(o.vars), &vars); err != nil {
			return nil, fmt.Errorf("-vars: %w", err)
		}
	}
	return json.Marshal(map[string]any{"query": query, "variables": vars})
}

// row is one line of the table.
type row struct {
	name      string
	clients   int
	requests  int
	errors    int
	perSecond float64
	p50, p99  time.Duration
	firstErr  error
}

// load runs work from n clients for o.duration after o.warmup, each client
// calling its own work in a loop, and measures each call.
func load(ctx context.Context, name string, n int, o options, work func(client int) func(context.Context) error) row {
	ctx, cancel := context.WithTimeout(ctx, o.warmup+o.duration)
	defer cancel()
	start := time.Now().Add(o.warmup)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		failed    atomic.Int64
		firstErr  error
		wg        sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := work(i)
			var mine []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				err := w(ctx)
				took := time.Since(t0)
				if ctx.Err() != nil {
					break // cut short by the end of the row: not counted
				}
				if t0.Before(start) {
					continue
				}
				mine = append(mine, took)
				if err != nil {
					if failed.Add(1) == 1 {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
				}
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	r := row{name: name, clients: n, requests: len(latencies), errors: int(failed.Load()), firstErr: firstErr}
	if elapsed > 0 {
		r.perSecond = float64(len(latencies)) / elapsed.Seconds()
	}
	if len(latencies) > 0 {
		r.p50 = latencies[len(latencies)*50/100]
		r.p99 = latencies[min(len(latencies)-1, len(latencies)*99/100)]
	}
	fmt.Fprintf(os.Stderr, "%s at %d: %d requests\n", name, n, r.requests)
	return r
}

func print(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what\tclients\trequests\treq/s\tp50\tp99\terrors\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%s\t%d\t\n", r.name, r.clients, r.requests, r.perSecond, ms(r.p50), ms(r.p99), r.errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.firstErr != nil {
			fmt.Fprintf(w, "%s at %d clients, first error: %v\n", r.name, r.clients, r.firstErr)
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// client speaks to the API.
type client struct {
	url, token string
	http       *http.Client
}

func newClient(url, token string, conns int) *client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = conns
	t.MaxIdleConns = conns
	return &client{url: url, token: token, http: &http.Client{Transport: t, Timeout: time.Minute}}
}

// errorsKey can only be the response's own errors: inside a JSON string
// every quote is escaped.
var errorsKey = []byte(`"errors":[`)

// post sends a GraphQL request; a status other than 200 or a response with
// errors is an error. When out is not nil the data is decoded into it.
func (c *client) post(ctx context.Context, body []byte, out any) error {
	raw, err := c.fetch(ctx, body)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(raw, &struct{ Data any }{Data: out})
}

// fetch sends a GraphQL request and returns its answer; a status other
// than 200 or a response with errors is an error.
func (c *client) fetch(ctx context.Context, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK || bytes.Contains(raw, errorsKey) {
		return nil, fmt.Errorf("status %d: %.300s", res.StatusCode, raw)
	}
	return raw, nil
}

func (c *client) do(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	return c.post(ctx, body, out)
}

func (c *client) createAgent(ctx context.Context) (string, error) {
	var out struct{ CreateAgent struct{ ID string } }
	err := c.do(ctx, `mutation($n: String!) { createAgent(input: {name: $n, instructions: "Answer briefly.", tools: ["calculator"]}) { id } }`,
		map[string]any{"n": fmt.Sprintf("load %d", time.Now().UnixNano())}, &out)
	if err != nil {
		return "", fmt.Errorf("create agent: %w", err)
	}
	return out.CreateAgent.ID, nil
}

func (c *client) startConversation(ctx context.Context, agent string) (string, error) {
	var out struct{ StartConversation struct{ ID string } }
	err := c.do(ctx, `mutation($a: ID!) { startConversation(input: {agentId: $a, title: "load"}) { id } }`,
		map[string]any{"a": agent}, &out)
	if err != nil {
		return "", fmt.Errorf("start conversation: %w", err)
	}
	return out.StartConversation.ID, nil
}

func (c *client) seed(ctx context.Context, agent string, turns int) (string, error) {
	conv, err := c.startConversation(ctx, agent)
	if err != nil {
		return "", err
	}
	for range turns {
		if err := c.turn(ctx, conv); err != nil {
			return "", fmt.Errorf("seed: %w", err)
		}
	}
	return conv, nil
}

// turn sends a message and follows the turn over the websocket until it
// ends; a turn that does not end COMPLETED is an error.
func (c *client) turn(ctx context.Context, conv string) error {
	id, err := c.send(ctx, conv)
	if err != nil {
		return err
	}
	return c.finish(ctx, id)
}

// send sends a message and returns its turn's id.
func (c *client) send(ctx context.Context, conv string) (string, error) {
	var out struct{ SendMessage struct{ ID string } }
	err := c.do(ctx, `mutation($c: ID!) { sendMessage(input: {conversationId: $c, text: "What do 1,200 and 850 come to with a 20% markup?"}) { id } }`,
		map[string]any{"c": conv}, &out)
	if err != nil {
		return "", fmt.Errorf("send message: %w", err)
	}
	return out.SendMessage.ID, nil
}

// finish follows a turn to its end; one that does not end COMPLETED is an
// error.
func (c *client) finish(ctx context.Context, turn string) error {
	status, err := c.follow(ctx, turn)
	if err != nil {
		return err
	}
	if status != "COMPLETED" {
		return fmt.Errorf("turn %s ended %s", turn, status)
	}
	return nil
}

// follow subscribes to a turn's events and returns its last status.
func (c *client) follow(ctx context.Context, turn string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(c.url, "http")
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return "", fmt.Errorf("websocket: %w", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return conn.Write(ctx, websocket.MessageText, b)
	}
	if err := send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + c.token}}); err != nil {
		return "", err
	}
	status := ""
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return status, fmt.Errorf("follow turn: %w", err)
		}
		var msg struct {
			Type    string
			Payload json.RawMessage
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			return status, err
		}
		switch msg.Type {
		case "connection_ack":
			err = send(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
				"query":     `subscription($t: ID!) { turnEvents(turnId: $t) { turn { status } } }`,
				"variables": map[string]any{"t": turn},
			}})
		case "ping":
			err = send(map[string]any{"type": "pong"})
		case "next":
			var p struct {
				Data struct {
					TurnEvents struct{ Turn struct{ Status string } }
				}
				Errors []struct{ Message string }
			}
			if err := json.Unmarshal(msg.Payload, &p); err != nil {
				return status, err
			}
			if len(p.Errors) > 0 {
				return status, fmt.Errorf("follow turn: %s", p.Errors[0].Message)
			}
			status = cmp.Or(p.Data.TurnEvents.Turn.Status, status)
		case "error":
			return status, fmt.Errorf("follow turn: %s", msg.Payload)
		case "complete":
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return status, nil
		}
		if err != nil {
			return status, err
		}
	}
}

// The statements of the floor: what the console's transcript shows of a
// conversation, its first 100 turns, their tool calls with their results'
// metadata, and their model calls.
const (
	conversationRow = `SELECT c.id, c.title, c.created_at, c.turns_count, u.id, u.name, u.department, a.id, a.name
FROM conversations c JOIN users u ON u.id = c.user_id JOIN agents a ON a.id = c.agent_id WHERE c.id = $1`
	turnRows = `SELECT id, number, status, started_at, finished_at, time_zone, user_text, answer, error, replayed
FROM turns WHERE conversation_id = $1 ORDER BY number, id LIMIT 101`
	toolCallRows = `SELECT t.id, t.turn_id, t.position, t.name, t.arguments, t.outcome, t.attempts, t.message, t.ref, t.guardrail,
t.started_at, t.finished_at, t.failures, r.ref, r.kind, r.chars, r.bytes, r.items, r.truncated_at_source, r.created_at
FROM tool_calls t LEFT JOIN stored_results r ON r.id = t.result_id WHERE t.turn_id = ANY($1) ORDER BY t.turn_id, t.position`
	modelCallRows = `SELECT turn_id, step, kind, model, duration_ms, input_tokens, cache_read_tokens, cache_write_tokens,
output_tokens, cost_micros, prefix_tokens FROM model_calls WHERE turn_id = ANY($1) ORDER BY turn_id, step`
)

// readRows reads a transcript's rows with plain SQL through lib/pq, each
// column as raw bytes: the floor a server's read cannot go under.
func readRows(ctx context.Context, db *sql.DB, f floor, conv int) error {
	if err := scanAll(ctx, db, f.conversation, conv); err != nil {
		return err
	}
	var turns []int64
	rows, err := db.QueryContext(ctx, f.turns, conv)
	if err != nil {
		return err
	}
	cols, err := rows.Columns()
	if err != nil {
		rows.Close()
		return err
	}
	dest := rawDest(len(cols))
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return err
		}
		id, _ := strconv.ParseInt(string(*dest[0].(*sql.RawBytes)), 10, 64)
		turns = append(turns, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, q := range f.perTurns {
		if err := scanAll(ctx, db, q, pq.Array(turns)); err != nil {
			return err
		}
	}
	return nil
}

func scanAll(ctx context.Context, db *sql.DB, query string, args ...any) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	dest := rawDest(len(cols))
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
	}
	return rows.Err()
}

func rawDest(n int) []any {
	dest := make([]any, n)
	for i := range dest {
		dest[i] = new(sql.RawBytes)
	}
	return dest
}
