package embed

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The tools that need embeddings are offered while the embedding model is
// set and answers: a model configured but down would be offered on every
// turn, and every call to it would fail. Watched knows which, at no cost
// to a turn: it asks the model once at start, reads the outcome of every
// real request, and asks again (at most once per Every) only after a
// request failed or while the model is down, so that one that recovers is
// offered again.

// DefaultEvery is how often a model that does not answer is asked again,
// and the least time between two probes.
const DefaultEvery = 30 * time.Second

// probeTimeout bounds one probe, its retries included.
const probeTimeout = 30 * time.Second

// probeText is what a probe embeds: a word any model embeds, so a probe
// fails only when the model does not answer, never for what it was given.
const probeText = "availability"

// Watched is an Embedder whose availability is known (Down). Its zero
// value is not usable: use Watch, and Run it.
type Watched struct {
	Embedder
	every time.Duration
	// ask wakes Run for a probe after a request failed.
	ask chan struct{}

	mu   sync.Mutex
	down string
}

// Watch returns e watched; every is how often a model that does not answer
// is asked again (0: DefaultEvery). Nothing is probed until Run.
func Watch(e Embedder, every time.Duration) *Watched {
	if every <= 0 {
		every = DefaultEvery
	}
	return &Watched{Embedder: e, every: every, ask: make(chan struct{}, 1)}
}

// Embed embeds through the watched model and learns from the outcome: an
// answer says the model answers; a failure asks for a probe, which decides
// (the failure may have been the texts', not the model's).
func (w *Watched) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := w.Embedder.Embed(ctx, texts)
	switch {
	case err == nil:
		w.set("")
	case ctx.Err() == nil:
		select {
		case w.ask <- struct{}{}:
		default:
		}
	}
	return vecs, err
}

// Down says why the model does not answer, as the last probe found it: ""
// while it answers, and before the first probe has told.
func (w *Watched) Down() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.down
}

func (w *Watched) set(down string) {
	w.mu.Lock()
	w.down = down
	w.mu.Unlock()
}

// Run probes the model at once, then again every Every while it does not
// answer, and after a request failed (at most once per Every), until ctx
// ends. Its owner runs it in a goroutine and waits for it to return.
func (w *Watched) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	armed := true
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.ask:
			if !armed {
				// At once, or once the least gap since the last has passed.
				timer.Reset(max(0, time.Until(last.Add(w.every))))
				armed = true
			}
			continue
		case <-timer.C:
		}
		armed = false
		last = time.Now()
		w.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		if w.Down() != "" {
			timer.Reset(w.every)
			armed = true
		}
	}
}

// probe asks the model to embed one word, with the configured retries.
func (w *Watched) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := w.Embedder.Embed(pctx, []string{probeText})
	switch {
	case err == nil:
		w.set("")
	case ctx.Err() == nil:
		w.set(fmt.Sprintf("the embedding model %s does not answer (%s)", w.Model(), strings.TrimPrefix(clip(err).Error(), "embed texts: ")))
	}
}

// Down says why e, the server's embedding model, does not answer now: ""
// when it answers, when nothing is known yet, or when e is not Watched.
func Down(e Embedder) string {
	if w, ok := e.(interface{ Down() string }); ok {
		return w.Down()
	}
	return ""
}
