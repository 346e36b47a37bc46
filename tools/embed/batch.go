package embed

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/tools"
)

// maxError bounds the provider's words kept in a per-item failure.
const maxError = 300

// Batch embeds texts in one request. When that request fails after its
// retries, each text is tried once more on its own, at once: a text the
// provider cannot embed fails alone, and a provider that is down costs one
// more attempt per text, not another schedule of retries. errs[i] is set
// for each text that could not be embedded. The attempts each text had
// are recorded on ctx (tools.Attempted): the shared request's, and the
// one more of a text tried alone.
func Batch(ctx context.Context, e Embedder, texts []string) (vecs [][]float32, errs []error) {
	errs = make([]error, len(texts))
	shared, tries := tools.WithAttempts(ctx)
	vecs, err := e.Embed(shared, texts)
	n := max(tries.N(), 1)
	if err == nil {
		tools.Attempted(ctx, n)
		return vecs, errs
	}
	if ctx.Err() != nil || len(texts) == 1 {
		tools.Attempted(ctx, n)
		for i := range errs {
			errs[i] = clip(err)
		}
		return make([][]float32, len(texts)), errs
	}
	tools.Attempted(ctx, n+1)
	vecs = make([][]float32, len(texts))
	var wg sync.WaitGroup
	for i, t := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := e.Embed(Once(shared), []string{t})
			if err != nil {
				errs[i] = clip(err)
				return
			}
			vecs[i] = v[0]
		}()
	}
	wg.Wait()
	return vecs, errs
}

func clip(err error) error {
	msg := err.Error()
	if len(msg) > maxError {
		msg = strings.ToValidUTF8(msg[:maxError], "") + "…"
	}
	return errors.New(msg)
}
