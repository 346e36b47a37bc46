package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// team loads the server as a team does: o.readers clients read the seeded
// transcript in a loop while o.writers clients each run turns, one after
// the other, in a conversation of their own, all at once for o.duration
// after o.warmup. It prints the turns completed, sendMessage's and whole
// turns' latencies, the reads', the errors of each, and the CPU the
// server (from its /metrics) and this program used meanwhile.
func team(ctx context.Context, c *client, o options, stdout io.Writer) error {
	if o.agent == "" {
		id, err := c.createAgent(ctx)
		if err != nil {
			return err
		}
		o.agent = id
	}
	if o.conversation == "" && o.readers > 0 {
		fmt.Fprintf(os.Stderr, "seeding a conversation of %d turns...\n", o.seedTurns)
		id, err := c.seed(ctx, o.agent, o.seedTurns)
		if err != nil {
			return err
		}
		o.conversation = id
	}
	body, err := transcriptBody(o)
	if err != nil {
		return err
	}
	if o.readers > 0 {
		if err := c.post(ctx, body, nil); err != nil {
			return fmt.Errorf("transcript read: %w", err)
		}
	}
	convs := make([]string, o.writers)
	for i := range convs {
		if convs[i], err = c.startConversation(ctx, o.agent); err != nil {
			return err
		}
	}
	metrics := o.metricsURL
	if metrics == "" {
		metrics = strings.TrimSuffix(o.url, "/graphql") + "/metrics"
	}
	readCPU := func(ctx context.Context) (float64, error) {
		if o.serverPID > 0 {
			return processCPU(o.serverPID)
		}
		return serverCPU(ctx, c.http, metrics)
	}

	ctx, cancel := context.WithTimeout(ctx, o.warmup+o.duration)
	defer cancel()
	start := time.Now().Add(o.warmup)
	var (
		reads, sends, turns series
		wg                  sync.WaitGroup
	)
	// counted: an operation begun after the warmup and ended before the
	// deadline; one cut short by the end is not counted at all.
	counted := func(t0 time.Time) bool { return ctx.Err() == nil && !t0.Before(start) }
	for range o.readers {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				err := c.post(ctx, body, nil)
				if counted(t0) {
					reads.add(time.Since(t0), err)
				}
			}
		})
	}
	for i := range o.writers {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				id, err := c.send(ctx, convs[i])
				if counted(t0) {
					sends.add(time.Since(t0), err)
				}
				if err != nil {
					if counted(t0) {
						turns.add(time.Since(t0), err)
					}
					// A conversation left busy by a lost turn takes no more
					// messages: go on in a new one.
					if nc, err := c.startConversation(ctx, o.agent); err == nil {
						convs[i] = nc
					}
					continue
				}
				err = c.finish(ctx, id)
				if counted(t0) {
					turns.add(time.Since(t0), err)
				}
			}
		})
	}
	// The CPU is read from the end of the warmup to the deadline.
	time.Sleep(time.Until(start))
	cpu0, cpuErr := readCPU(context.WithoutCancel(ctx))
	self0 := selfCPU()
	<-ctx.Done()
	elapsed := time.Since(start)
	cpu1, err := readCPU(context.Background())
	self1 := selfCPU()
	if cpuErr == nil {
		cpuErr = err
	}
	wg.Wait()

	fmt.Fprintf(stdout, "%d readers, %d writers, %s measured after a %s warmup\n", o.readers, o.writers, o.duration, o.warmup)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what\tdone\tper s\tp50\tp99\terrors\t")
	for _, r := range []struct {
		name string
		s    *series
	}{{"transcript read", &reads}, {"sendMessage", &sends}, {"turn", &turns}} {
		done, failed, p50, p99 := r.s.summary()
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t%d\t\n", r.name, done, float64(done)/elapsed.Seconds(), ms(p50), ms(p99), failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cpuErr != nil {
		fmt.Fprintf(stdout, "server CPU: unknown (%v)\n", cpuErr)
	} else {
		fmt.Fprintf(stdout, "server CPU: %.2f cores (%.1f s over %.1f s)\n", (cpu1-cpu0)/elapsed.Seconds(), cpu1-cpu0, elapsed.Seconds())
	}
	fmt.Fprintf(stdout, "load program CPU: %.2f cores\n", (self1-self0).Seconds()/elapsed.Seconds())
	for _, r := range []struct {
		name string
		s    *series
	}{{"transcript read", &reads}, {"sendMessage", &sends}, {"turn", &turns}} {
		if r.s.firstErr != nil {
			fmt.Fprintf(stdout, "%s, first error: %v\n", r.name, r.s.firstErr)
		}
	}
	return nil
}

// series is one kind of operation's measures: the latencies of those that
// succeeded, and the failures.
type series struct {
	mu        sync.Mutex
	latencies []time.Duration
	failed    int
	firstErr  error
}

func (s *series) add(d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	s.latencies = append(s.latencies, d)
}

// summary: how many succeeded and failed, and the p50 and p99 of those
// that succeeded.
func (s *series) summary() (done, failed int, p50, p99 time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := slices.Sorted(slices.Values(s.latencies))
	if len(l) > 0 {
		p50 = l[len(l)*50/100]
		p99 = l[min(len(l)-1, len(l)*99/100)]
	}
	return len(l), s.failed, p50, p99
}

// serverCPU reads process_cpu_seconds_total from a Prometheus endpoint.
func serverCPU(ctx context.Context, hc *http.Client, url string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read server CPU: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read server CPU: %s answered %d", url, res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read server CPU: %w", err)
	}
	return 0, fmt.Errorf("read server CPU: %s has no process_cpu_seconds_total", url)
}
