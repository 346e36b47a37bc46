package events_test

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/runtime/events"
)

// follower reads a turn's stream as a subscription does: woken, it reads
// what is new from where it stands.
func followStream(bus *events.Bus, sub *events.Subscription, turn int, want int, seen func(at time.Time)) int {
	bytes := 0
	for bytes < want {
		<-sub.Text
		tx, ok := bus.Text(turn, bytes)
		if !ok {
			continue
		}
		bytes = tx.Bytes
		if seen != nil {
			seen(tx.At)
		}
	}
	return bytes
}

// BenchmarkStreamLatency: from the provider's piece to a subscriber holding
// it, on the replica that runs the turn (p50-us, p99-us).
func BenchmarkStreamLatency(b *testing.B) {
	bus := events.NewBus()
	sub := bus.Subscribe(1)
	defer sub.Close()
	var lat []time.Duration
	for b.Loop() {
		w := bus.Begin(1, 0)
		done := make(chan struct{})
		var sent []time.Time
		go func() {
			defer close(done)
			bytes := 0
			for bytes < 200 {
				<-sub.Text
				tx, ok := bus.Text(1, bytes)
				if !ok || tx.Bytes == bytes {
					continue
				}
				now := time.Now()
				for i := bytes; i < tx.Bytes; i += 10 {
					lat = append(lat, now.Sub(sent[i/10]))
				}
				bytes = tx.Bytes
			}
		}()
		sent = make([]time.Time, 20)
		for i := range 20 {
			sent[i] = time.Now()
			w.Text("0123456789")
			time.Sleep(200 * time.Microsecond)
		}
		<-done
		w.End()
	}
	report(b, lat)
}

// BenchmarkStreamLatencyAcrossReplicas: the same to a subscriber on
// another replica, through PostgreSQL.
func BenchmarkStreamLatencyAcrossReplicas(b *testing.B) {
	a, other, _ := bridgedB(b)
	turn := int(time.Now().UnixNano()%1_000_000_000) + 99
	sub := other.Subscribe(turn)
	defer sub.Close()
	var lat []time.Duration
	step := 0
	for b.Loop() {
		w := a.Begin(turn, step)
		var mu sync.Mutex
		sent := make([]time.Time, 20)
		done := make(chan struct{})
		go func() {
			defer close(done)
			bytes := 0
			for bytes < 200 {
				<-sub.Text
				tx, ok := other.Text(turn, bytes)
				if !ok || tx.Step != step || !tx.Synced || tx.Bytes == bytes || tx.From != bytes {
					continue
				}
				now := time.Now()
				mu.Lock()
				for i := bytes; i < tx.Bytes; i += 10 {
					lat = append(lat, now.Sub(sent[i/10]))
				}
				mu.Unlock()
				bytes = tx.Bytes
			}
		}()
		for i := range 20 {
			mu.Lock()
			sent[i] = time.Now()
			mu.Unlock()
			w.Text("0123456789")
			time.Sleep(5 * time.Millisecond)
		}
		<-done
		w.End()
		step++
	}
	report(b, lat)
}

// BenchmarkStreamFanout: 100 turns streaming at once to 10 subscribers
// each (1,000 subscribers), each subscriber holding every character: CPU
// per piece delivered, and the memory a subscription holds.
func BenchmarkStreamFanout(b *testing.B) {
	const turns, subs, pieces = 100, 10, 200
	var before, after runtime.MemStats
	for b.Loop() {
		bus := events.NewBus()
		runtime.GC()
		runtime.ReadMemStats(&before)
		var all []*events.Subscription
		var wg sync.WaitGroup
		for t := range turns {
			for range subs {
				s := bus.Subscribe(t)
				all = append(all, s)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if followStream(bus, s, t, pieces*10, nil) != pieces*10 {
						b.Error("lost text")
					}
				}()
			}
		}
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(turns*subs), "B/subscriber")
		var writers sync.WaitGroup
		for t := range turns {
			writers.Add(1)
			go func() {
				defer writers.Done()
				w := bus.Begin(t, 0)
				for range pieces {
					w.Text("0123456789")
				}
			}()
		}
		writers.Wait()
		wg.Wait()
		for _, s := range all {
			s.Close()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*turns*pieces), "ns/piece-written")
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		b.Fatal("nothing measured")
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
}
