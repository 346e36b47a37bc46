// Command eino measures, side by side in one run, the CPU a one-call turn
// costs in toolgate (the server and its PostgreSQL together) and in an Eino
// ReAct agent, both driven by the same zero-delay fake Chat Completions
// model: the first model call of a turn asks for one calculator call, the
// second answers. Eino's calculator calls toolgate's calculate over
// GraphQL, as a framework user reaching toolgate would.
//
//	go run . -turns 200                      # toolgate on SQLite
//	go run . -turns 200 -database-url postgres://…/einobench?sslmode=disable
//
// Own module, so toolgate's never depends on Eino; it reaches toolgate only
// through its command line and its HTTP API.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "eino bench:", err)
		os.Exit(1)
	}
}

type config struct {
	turns, warmup, rounds int
	databaseURL, bin      string
	repo                  string
	idle                  time.Duration
}

func run() error {
	var c config
	fakeModelOnly := flag.Bool("fake-model", false, "serve the fake model only, printing its URL (the bench runs itself so)")
	flag.IntVar(&c.turns, "turns", 200, "measured one-call turns on each side")
	flag.IntVar(&c.warmup, "warmup", 20, "turns on each side before measuring")
	flag.IntVar(&c.rounds, "rounds", 4, "blocks the turns are split into, toolgate's and Eino's alternating, so a change in the machine's load falls on both")
	flag.StringVar(&c.databaseURL, "database-url", os.Getenv("BENCH_DATABASE_URL"), "toolgate's database: postgres://… (an empty database of its own; env BENCH_DATABASE_URL); none: SQLite in a temporary folder")
	flag.StringVar(&c.bin, "toolgate", "", "the toolgate binary; none: built from -repo")
	flag.StringVar(&c.repo, "repo", "../..", "toolgate's repository, to build the binary from")
	flag.DurationVar(&c.idle, "idle", 5*time.Second, "how long the idle server's own CPU is measured, for reference")
	flag.Parse()
	if *fakeModelOnly {
		return serveFakeModel()
	}
	if c.turns < c.rounds || c.rounds < 1 {
		return fmt.Errorf("-turns %d must be at least -rounds %d, which must be at least 1", c.turns, c.rounds)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return bench(ctx, c)
}

// side is what one side's measured turns added up to.
type side struct {
	self, server, model time.Duration // this process, toolgate's, the fake model's CPU
	pg                  pgDelta
	requests, bytes     int64 // model requests and their bytes
	walls               []time.Duration
}

func bench(ctx context.Context, c config) error {
	dir, err := os.MkdirTemp("", "eino-bench-")
	if err != nil {
		return fmt.Errorf("temporary folder: %w", err)
	}
	defer os.RemoveAll(dir)
	if c.bin == "" {
		c.bin = filepath.Join(dir, "toolgate")
		fmt.Fprintln(os.Stderr, "building toolgate...")
		build := exec.CommandContext(ctx, "go", "build", "-o", c.bin, "./cmd/toolgate")
		build.Dir, build.Stdout, build.Stderr = c.repo, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build toolgate: %w", err)
		}
	}
	database, backend := "", "SQLite"
	if c.databaseURL != "" {
		u, err := url.Parse(c.databaseURL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return fmt.Errorf("-database-url: a postgres:// URL, or none for SQLite")
		}
		database, backend = strings.TrimPrefix(u.Path, "/"), "PostgreSQL"
	}

	model, err := startFakeModel(ctx)
	if err != nil {
		return err
	}
	defer model.stop()
	tg, err := startToolgate(ctx, c.bin, dir, c.databaseURL, model.url)
	if err != nil {
		return err
	}
	defer tg.stop()

	agent, err := tg.createAgent(ctx)
	if err != nil {
		return fmt.Errorf("create agent: %w", err)
	}
	// A conversation a turn, made beforehand: every measured turn is alike,
	// with no history to replay, as an Eino turn given one message has none.
	conversations := make([]string, c.warmup+c.turns)
	for i := range conversations {
		if conversations[i], err = tg.startConversation(ctx, agent); err != nil {
			return fmt.Errorf("start conversation: %w", err)
		}
	}
	einoConversation, err := tg.startConversation(ctx, agent)
	if err != nil {
		return fmt.Errorf("start conversation: %w", err)
	}
	ea, err := newEinoAgent(ctx, model.url, tg, einoConversation)
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "warming up, %d turns each...\n", c.warmup)
	for i := range c.warmup {
		if _, err := tg.turn(ctx, conversations[i]); err != nil {
			return fmt.Errorf("toolgate warm-up turn: %w", err)
		}
		if err := ea.turn(ctx); err != nil {
			return fmt.Errorf("eino warm-up turn: %w", err)
		}
	}
	conversations = conversations[c.warmup:]

	time.Sleep(time.Second) // the warm-up's last events and jobs settle
	idle, err := measure(ctx, tg, model, database, func() error {
		select {
		case <-time.After(c.idle):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "measuring %d turns each on %s, in %d rounds...\n", c.turns, backend, c.rounds)
	var tgSide, einoSide side
	var turns []string
	done := 0
	for r := range c.rounds {
		n := c.turns / c.rounds
		if r == c.rounds-1 {
			n = c.turns - done
		}
		block := conversations[done : done+n]
		s, err := measure(ctx, tg, model, database, func() error {
			for _, conv := range block {
				start := time.Now()
				turn, err := tg.turn(ctx, conv)
				if err != nil {
					return fmt.Errorf("toolgate turn: %w", err)
				}
				tgSide.walls = append(tgSide.walls, time.Since(start))
				turns = append(turns, turn)
			}
			return nil
		})
		if err != nil {
			return err
		}
		tgSide = tgSide.add(s)
		s, err = measure(ctx, tg, model, database, func() error {
			for range n {
				start := time.Now()
				if err := ea.turn(ctx); err != nil {
					return fmt.Errorf("eino turn: %w", err)
				}
				einoSide.walls = append(einoSide.walls, time.Since(start))
			}
			return nil
		})
		if err != nil {
			return err
		}
		einoSide = einoSide.add(s)
		done += n
	}
	if calls := ea.calls.Load(); calls != int64(c.warmup+c.turns) {
		return fmt.Errorf("eino's calculator ran %d times in %d turns", calls, c.warmup+c.turns)
	}
	for name, s := range map[string]side{"toolgate": tgSide, "eino": einoSide} {
		if s.requests != int64(2*c.turns) {
			return fmt.Errorf("%s's turns made %d model requests, not 2 a turn", name, s.requests)
		}
	}
	// What following a turn's events costs the server at the least: the
	// subscription to a turn that has ended (its status, and the end), apart
	// from the turns, for the reader to weigh the portal's part of a turn.
	follow, err := measure(ctx, tg, model, database, func() error {
		for _, turn := range turns {
			if err := tg.follow(ctx, turn); err != nil {
				return fmt.Errorf("follow an ended turn: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	report(os.Stdout, c, backend, database, tgSide, einoSide, idle, follow)
	return nil
}

// measure runs f and returns the CPU every process spent meanwhile.
func measure(ctx context.Context, tg *server, model *fakeModelProc, database string, f func() error) (side, error) {
	var s side
	server0, err := tg.cpu()
	if err != nil {
		return s, err
	}
	model0, err := procCPU(model.cmd.Process.Pid)
	if err != nil {
		return s, err
	}
	stats0, err := model.stats(ctx)
	if err != nil {
		return s, err
	}
	pg0 := snapshotPostgres(database)
	self0 := selfCPU()
	if err := f(); err != nil {
		return s, err
	}
	s.self = selfCPU() - self0
	s.pg = snapshotPostgres(database).since(pg0)
	server1, err := tg.cpu()
	if err != nil {
		return s, err
	}
	model1, err := procCPU(model.cmd.Process.Pid)
	if err != nil {
		return s, err
	}
	stats1, err := model.stats(ctx)
	if err != nil {
		return s, err
	}
	s.server, s.model = server1-server0, model1-model0
	s.requests, s.bytes = stats1.Requests-stats0.Requests, stats1.Bytes-stats0.Bytes
	if stats1.Refused > 0 {
		return s, fmt.Errorf("the fake model refused %d requests that were not streamed chat completions", stats1.Refused)
	}
	return s, nil
}

func (s side) add(e side) side {
	return side{
		self: s.self + e.self, server: s.server + e.server, model: s.model + e.model,
		pg: s.pg.add(e.pg), requests: s.requests + e.requests, bytes: s.bytes + e.bytes,
		walls: s.walls,
	}
}

func report(w *os.File, c config, backend, database string, tgSide, einoSide, idle, follow side) {
	n := time.Duration(c.turns)
	per := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d/n)/1e6) }
	p50 := func(walls []time.Duration) string {
		w := slices.Clone(walls)
		slices.Sort(w)
		return fmt.Sprintf("%.1f ms", float64(w[len(w)/2])/1e6)
	}
	pg := backend == "PostgreSQL"
	tgTotal := tgSide.server
	einoServed := einoSide.server
	if pg {
		tgTotal += tgSide.pg.db
		einoServed += einoSide.pg.db
	}
	fmt.Fprintf(w, "One-call turns, toolgate on %s: %d measured a side after %d warm-up, in %d alternating rounds.\n", backend, c.turns, c.warmup, c.rounds)
	fmt.Fprintf(w, "CPU per turn (user + system, all threads), wall time from the request to the turn's end.\n\n")
	row := func(label, cpu, wall string) { fmt.Fprintf(w, "  %-45s %10s %10s\n", label, cpu, wall) }
	row("", "CPU/turn", "wall p50")
	row("toolgate server", per(tgSide.server), "")
	if pg {
		row("PostgreSQL (backends of database "+database+")", per(tgSide.pg.db), "")
	}
	row("toolgate total", per(tgTotal), p50(tgSide.walls))
	row("Eino alone (its process)", per(einoSide.self), p50(einoSide.walls))
	row("toolgate serving Eino's calculate", per(einoSide.server), "")
	if pg {
		row("PostgreSQL for those", per(einoSide.pg.db), "")
	}
	row("Eino + calculate served", per(einoSide.self+einoServed), "")
	ratio := func(a, b time.Duration) string { return fmt.Sprintf("%.2f×", float64(a)/float64(b)) }
	fmt.Fprintf(w, "\nratio, toolgate total / Eino alone:              %s\n", ratio(tgTotal, einoSide.self))
	fmt.Fprintf(w, "ratio, toolgate total / Eino + calculate served: %s (the goal: at most 2×)\n", ratio(tgTotal, einoSide.self+einoServed))
	fmt.Fprintf(w, "\nFor reference:\n")
	fmt.Fprintf(w, "- the fake model (its own process), per turn: %s for toolgate's calls, %s for Eino's; request bodies averaged %d bytes from toolgate, %d from Eino\n",
		per(tgSide.model), per(einoSide.model), tgSide.bytes/tgSide.requests, einoSide.bytes/einoSide.requests)
	idleRate := func(d time.Duration) string { return fmt.Sprintf("%.2f ms/s", float64(d)/1e6/c.idle.Seconds()) }
	fmt.Fprintf(w, "- idle, over %s: toolgate server %s", c.idle, idleRate(idle.server))
	if pg {
		fmt.Fprintf(w, ", its PostgreSQL backends %s", idleRate(idle.pg.db))
	}
	fmt.Fprintf(w, " (the timers' own work, counted in the figures above as it falls)\n")
	fmt.Fprintf(w, "- a turnEvents subscription over SSE to a turn that has ended, measured apart: toolgate server %s", per(follow.server))
	if pg {
		fmt.Fprintf(w, ", PostgreSQL %s", per(follow.pg.db))
	}
	fmt.Fprintf(w, " (each measured turn above is followed so, live, to its end)\n")
	if pg {
		fmt.Fprintf(w, "- every postgres process, per toolgate turn: %s (with the WAL writer, checkpointer and any other database's backends; this machine's PostgreSQL is shared, so the backends of %s alone are the figure above)\n",
			per(tgSide.pg.all), database)
		if ended := tgSide.pg.ended + einoSide.pg.ended; ended > 0 {
			fmt.Fprintf(w, "- %d backends of %s ended during a measurement: their last CPU is not counted, so the PostgreSQL figures are a lower bound\n", ended, database)
		}
	}
}

// fakeModelProc is the fake model, run as a child process of this binary.
type fakeModelProc struct {
	cmd *exec.Cmd
	url string
}

func startFakeModel(ctx context.Context) (*fakeModelProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary: %w", err)
	}
	cmd := exec.Command(self, "-fake-model")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("fake model's output: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fake model: %w", err)
	}
	m := &fakeModelProc{cmd: cmd}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		m.stop()
		return nil, fmt.Errorf("read fake model's address: %w", err)
	}
	m.url = strings.TrimSpace(line)
	return m, nil
}

func (m *fakeModelProc) stop() {
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
}

func (m *fakeModelProc) stats(ctx context.Context) (modelStats, error) {
	var s modelStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url+"/stats", nil)
	if err != nil {
		return s, fmt.Errorf("new request: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("fake model's stats: %w", err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("decode fake model's stats: %w", err)
	}
	return s, nil
}
