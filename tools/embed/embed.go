// Package embed turns text into vectors for the search tools (documents,
// memory): one Embedder interface over an OpenAI-compatible
// /v1/embeddings endpoint ("openai") and a built-in offline embedder
// ("local") that is lexical, not semantic, and says so.
//
// One Embed call is one request, whatever the number of texts: a search
// with several queries embeds them all at once (the batching rule: two
// angles cost one embedding request). Callers that embed many texts
// (ingestion) cut them into batches of at most MaxBatch.
//
// Vectors are L2-normalised, so the dot product is the cosine similarity.
// A vector is only comparable with vectors of the same Model.
package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
)

// The providers, as TOOLGATE_EMBEDDING_PROVIDER names them.
const (
	// ProviderOpenAI calls /v1/embeddings of OpenAI or any compatible
	// server (Ollama, vLLM, TEI, LiteLLM).
	ProviderOpenAI = "openai"
	// ProviderLocal is the built-in offline lexical embedder.
	ProviderLocal = "local"
	// ProviderNone switches embeddings off: the tools that need them are
	// not offered.
	ProviderNone = "none"
)

// MaxBatch is the most texts one Embed call may carry (OpenAI's limit on
// the inputs of one request).
const MaxBatch = 2048

// Embedder turns texts into vectors. Implementations are safe for
// concurrent use.
type Embedder interface {
	// Embed returns one normalised vector per text, in order, from one
	// request. An error means none of the texts was embedded.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Provider is the provider's configuration name.
	Provider() string
	// Model names the model; it is stored with every vector.
	Model() string
	// Lexical reports whether the vectors capture shared words and word
	// parts only, not meaning (the local embedder): paraphrases that share
	// no word are not found.
	Lexical() bool
}

// Config chooses and configures an Embedder. Zero fields take defaults.
type Config struct {
	// Provider is "openai", "local" or "none"; empty picks openai when
	// OPENAI_API_KEY is set, local otherwise.
	Provider string
	// Model defaults to DefaultOpenAIModel or LocalModel.
	Model string
	// BaseURL and APIKey default to OPENAI_BASE_URL and OPENAI_API_KEY,
	// read by the SDK.
	BaseURL, APIKey string
	// Dimensions asks an openai model for shorter vectors (text-embedding-3
	// and later); 0 leaves the model's own.
	Dimensions int
	// HTTPClient defaults to the SDK's.
	HTTPClient *http.Client
	// Retry runs each request, retrying as it sees fit; nil sends once.
	// The server wires the runtime's one retry loop in here.
	Retry func(ctx context.Context, call func(ctx context.Context) error) error
	// Middleware sees every HTTP exchange of the openai provider (the
	// retry loop's recorder); nil adds none. Its signature is the SDK's
	// option.Middleware.
	Middleware func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error)
}

// ProviderName returns the provider c names, with the default applied.
func (c Config) ProviderName() string {
	if c.Provider != "" {
		return c.Provider
	}
	if c.APIKey != "" || os.Getenv("OPENAI_API_KEY") != "" {
		return ProviderOpenAI
	}
	return ProviderLocal
}

// New returns the Embedder c names, or nil (and no error) for "none".
func New(c Config) (Embedder, error) {
	switch p := c.ProviderName(); p {
	case ProviderOpenAI:
		return newOpenAI(c)
	case ProviderLocal:
		if c.Model != "" && c.Model != LocalModel {
			return nil, fmt.Errorf("embedding model %q: the local provider has one model, %q", c.Model, LocalModel)
		}
		return NewLocal(), nil
	case ProviderNone:
		return nil, nil
	default:
		return nil, fmt.Errorf("embedding provider %q: want openai, local or none", p)
	}
}

type onceKey struct{}

// Once marks ctx so that Embed calls under it are sent once, without the
// configured retries: for a second look at texts whose shared request
// already failed after its retries.
func Once(ctx context.Context) context.Context { return context.WithValue(ctx, onceKey{}, true) }

func once(ctx context.Context) bool { return ctx.Value(onceKey{}) != nil }

// ErrEmpty is returned for an empty text: no provider embeds one.
var ErrEmpty = errors.New("text to embed is empty")

// Dot returns the dot product of a and b: their cosine similarity, both
// being normalised. Vectors of different lengths compare as 0.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		return 0
	}
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// Normalize scales v to unit length in place and returns it; a zero
// vector stays zero.
func Normalize(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
	return v
}

func checkTexts(texts []string) error {
	if len(texts) > MaxBatch {
		return fmt.Errorf("embed %d texts: at most %d per request", len(texts), MaxBatch)
	}
	for _, t := range texts {
		if t == "" {
			return ErrEmpty
		}
	}
	return nil
}
