//go:build linux

package browser_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// treeMemory samples, every interval until stopped, the memory of a
// process and all its descendants, from /proc: the sum of their resident
// sets (shared pages counted in each process) and of their proportional
// sets (a page shared by n processes counted 1/n in each, so the sum is
// what the tree holds). It keeps the peak of each sum.
type treeMemory struct {
	pid      int
	interval time.Duration

	stop context.CancelFunc
	done sync.WaitGroup
	halt sync.Once

	mu            sync.Mutex
	startPSS      int64 // bytes, before the first call
	peakRSS       int64 // bytes
	peakPSS       int64 // bytes
	peakProcesses int
}

// watchTree starts sampling the tree of pid until report, or the end of
// the benchmark; nil when there is no such process to watch.
func watchTree(b *testing.B, pid int, interval time.Duration) *treeMemory {
	if pid <= 0 {
		return nil
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/status"); err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &treeMemory{pid: pid, interval: interval, stop: cancel}
	m.sample()
	m.startPSS = m.peakPSS
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.sample()
			}
		}
	}()
	b.Cleanup(m.stopSampling)
	return m
}

// stopSampling ends the sampling and waits for it, once.
func (m *treeMemory) stopSampling() {
	m.halt.Do(func() {
		m.stop()
		m.done.Wait()
	})
}

// report stops the sampling, takes a last sample and reports the peaks as
// browser-peak-MB (proportional sets) and browser-rss-peak-MB (resident
// sets), in MiB, the most processes seen at once, and browser-idle-MB:
// the proportional sets of the warm browser before the first call.
func (m *treeMemory) report(b *testing.B) {
	if m == nil {
		return
	}
	m.stopSampling()
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	b.ReportMetric(float64(m.peakPSS)/(1<<20), "browser-peak-MB")
	b.ReportMetric(float64(m.peakRSS)/(1<<20), "browser-rss-peak-MB")
	b.ReportMetric(float64(m.peakProcesses), "browser-procs")
	b.ReportMetric(float64(m.startPSS)/(1<<20), "browser-idle-MB")
}

func (m *treeMemory) sample() {
	var rss, pss int64
	procs := descendants(m.pid)
	for _, p := range procs {
		r, s := memoryOf(p)
		rss += r
		pss += s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peakRSS = max(m.peakRSS, rss)
	m.peakPSS = max(m.peakPSS, pss)
	m.peakProcesses = max(m.peakProcesses, len(procs))
}

// descendants is pid and every process under it, read from each
// thread's children file.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		dir := "/proc/" + strconv.Itoa(out[i]) + "/task/"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, task := range tasks {
			raw, err := os.ReadFile(dir + task.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(raw)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// memoryOf is a process's resident and proportional set sizes in bytes,
// from smaps_rollup; 0, 0 for a process gone meanwhile.
func memoryOf(pid int) (rss, pss int64) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Rss:":
			rss = kb << 10
		case "Pss:":
			pss = kb << 10
		}
	}
	return rss, pss
}
