package embed

import (
	"context"
	"fmt"
	"net/url"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolgate/toolgate/tools"
)

// DefaultOpenAIModel is the embedding model asked for when none is named.
const DefaultOpenAIModel = "text-embedding-3-small"

// OpenAI embeds through /v1/embeddings with the official SDK, against
// OpenAI or any compatible server.
type OpenAI struct {
	client sdk.Client
	model  string
	dims   int
	retry  tools.Retry
}

func newOpenAI(c Config) (*OpenAI, error) {
	opts := []option.RequestOption{
		// Retries are the caller's (Config.Retry), one schedule for every
		// request the server makes.
		option.WithMaxRetries(0),
	}
	if c.Middleware != nil {
		opts = append(opts, option.WithMiddleware(c.Middleware))
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("embedding base URL %q is not an absolute URL", c.BaseURL)
		}
		opts = append(opts, option.WithBaseURL(c.BaseURL))
	}
	if c.APIKey != "" {
		opts = append(opts, option.WithAPIKey(c.APIKey))
	}
	if c.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(c.HTTPClient))
	}
	if c.Dimensions < 0 {
		return nil, fmt.Errorf("embedding dimensions %d is negative", c.Dimensions)
	}
	m := c.Model
	if m == "" {
		m = DefaultOpenAIModel
	}
	return &OpenAI{client: sdk.NewClient(opts...), model: m, dims: c.Dimensions, retry: c.Retry}, nil
}

// Provider returns "openai".
func (*OpenAI) Provider() string { return ProviderOpenAI }

// Model returns the model asked for.
func (o *OpenAI) Model() string { return o.model }

// Lexical returns false: a model's vectors carry meaning.
func (*OpenAI) Lexical() bool { return false }

// Embed sends every text in one request (retried by Config.Retry) and
// returns the vectors in the texts' order.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := checkTexts(texts); err != nil {
		return nil, err
	}
	if len(texts) == 0 {
		return nil, nil
	}
	params := sdk.EmbeddingNewParams{
		Input:          sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		Model:          sdk.EmbeddingModel(o.model),
		EncodingFormat: sdk.EmbeddingNewParamsEncodingFormatFloat,
	}
	if o.dims > 0 {
		params.Dimensions = sdk.Int(int64(o.dims))
	}
	var res *sdk.CreateEmbeddingResponse
	send := func(ctx context.Context) error {
		var err error
		res, err = o.client.Embeddings.New(ctx, params)
		return err
	}
	retry := o.retry
	if once(ctx) {
		retry = nil
	}
	// The attempts are recorded for the call that asked (tools.Try).
	if err := tools.Try(ctx, retry, send); err != nil {
		return nil, fmt.Errorf("embed texts: %w", err)
	}
	if len(res.Data) != len(texts) {
		return nil, fmt.Errorf("embed texts: asked for %d vectors, got %d", len(texts), len(res.Data))
	}
	out := make([][]float32, len(texts))
	dims := -1
	for _, e := range res.Data {
		i := int(e.Index)
		if i < 0 || i >= len(out) || out[i] != nil {
			return nil, fmt.Errorf("embed texts: vector index %d out of order", e.Index)
		}
		if len(e.Embedding) == 0 {
			return nil, fmt.Errorf("embed texts: vector %d is empty", i)
		}
		if dims >= 0 && len(e.Embedding) != dims {
			return nil, fmt.Errorf("embed texts: vectors of %d and %d dimensions in one answer", dims, len(e.Embedding))
		}
		dims = len(e.Embedding)
		v := make([]float32, dims)
		for j, x := range e.Embedding {
			v[j] = float32(x)
		}
		out[i] = Normalize(v)
	}
	return out, nil
}
