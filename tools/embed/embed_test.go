package embed_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/embed"
)

func TestLocalRanksSharedWordsAndWordParts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		give    string
		closer  string
		farther string
	}{
		{"same words", "reimbursement deadline", "the deadline for reimbursement is May", "the cafeteria opens at noon"},
		{"word parts", "reimbursed expenses", "expense reimbursement policy", "parking permits for visitors"},
		{"case and punctuation", "VPN-Setup", "how to set up the vpn setup", "holiday calendar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := embed.NewLocal().Embed(context.Background(), []string{tt.give, tt.closer, tt.farther})
			require.NoError(t, err)
			require.Len(t, v, 3)
			require.Greater(t, embed.Dot(v[0], v[1]), embed.Dot(v[0], v[2]))
		})
	}
}

func TestLocalIsStableAndNormalised(t *testing.T) {
	t.Parallel()
	a := embed.Vector("Quarterly revenue grew 12%")
	b := embed.Vector("Quarterly revenue grew 12%")
	require.Equal(t, a, b)
	require.Len(t, a, embed.LocalDimensions)
	require.InDelta(t, 1.0, embed.Dot(a, a), 1e-5)
	require.InDelta(t, 1.0, embed.Dot(a, embed.Vector("quarterly REVENUE, grew 12 %")), 1e-5)
}

func TestNewPicksProvider(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	tests := []struct {
		name    string
		give    embed.Config
		want    string
		wantErr string
	}{
		{name: "default without key", give: embed.Config{}, want: embed.ProviderLocal},
		{name: "default with key", give: embed.Config{APIKey: "k"}, want: embed.ProviderOpenAI},
		{name: "local", give: embed.Config{Provider: "local"}, want: embed.ProviderLocal},
		{name: "none", give: embed.Config{Provider: "none"}, want: ""},
		{name: "unknown", give: embed.Config{Provider: "word2vec"}, wantErr: `embedding provider "word2vec": want openai, local or none`},
		{name: "local with another model", give: embed.Config{Provider: "local", Model: "bge"}, wantErr: `the local provider has one model`},
		{name: "bad base url", give: embed.Config{Provider: "openai", BaseURL: "localhost"}, wantErr: "not an absolute URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := embed.New(tt.give)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.want == "" {
				require.Nil(t, e)
				return
			}
			require.Equal(t, tt.want, e.Provider())
		})
	}
}

// fakeEmbeddings is an OpenAI-compatible /v1/embeddings server: it answers
// each input with its local vector, in reverse order of index (the
// protocol allows any order), and fails while fail is positive.
type fakeEmbeddings struct {
	requests atomic.Int32
	fail     atomic.Int32
	inputs   [][]string
}

func (f *fakeEmbeddings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if f.fail.Add(-1) >= 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"message":"embedding backend is down"}}`))
		return
	}
	var req struct {
		Input []string `json:"input"`
		Model string   `json:"model"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.inputs = append(f.inputs, req.Input)
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	var data []item
	for i := len(req.Input) - 1; i >= 0; i-- {
		data = append(data, item{"embedding", i, embed.Vector(req.Input[i])[:64]})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
}

func TestOpenAIOneRequestForAllTextsInOrder(t *testing.T) {
	t.Parallel()
	fake := &fakeEmbeddings{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	e, err := embed.New(embed.Config{Provider: "openai", BaseURL: srv.URL + "/v1", APIKey: "test", Model: "bge-small"})
	require.NoError(t, err)
	require.Equal(t, "bge-small", e.Model())
	require.False(t, e.Lexical())

	texts := []string{"alpha beta", "gamma", "delta epsilon zeta"}
	v, err := e.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.EqualValues(t, 1, fake.requests.Load())
	require.Equal(t, [][]string{texts}, fake.inputs)
	require.Len(t, v, 3)
	for i, text := range texts {
		want := embed.Normalize(embed.Vector(text)[:64])
		require.InDeltaSlice(t, want, v[i], 1e-5, "vector %d is text %d's", i, i)
	}
}

func TestOpenAIRetryHookAndErrors(t *testing.T) {
	t.Parallel()
	fake := &fakeEmbeddings{}
	fake.fail.Store(2)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	var attempts int
	retry := func(ctx context.Context, call func(context.Context) error) error {
		var err error
		for attempts = 1; attempts <= 2; attempts++ {
			if err = call(ctx); err == nil {
				return nil
			}
		}
		return err
	}
	e, err := embed.New(embed.Config{Provider: "openai", BaseURL: srv.URL + "/v1", APIKey: "test", Retry: retry})
	require.NoError(t, err)

	_, err = e.Embed(context.Background(), []string{"x"})
	require.ErrorContains(t, err, "embed texts")
	require.ErrorContains(t, err, "503")
	require.EqualValues(t, 2, fake.requests.Load(), "the hook decides the attempts; the SDK retries nothing")

	v, err := e.Embed(context.Background(), []string{"x"})
	require.NoError(t, err)
	require.Len(t, v, 1)

	_, err = e.Embed(context.Background(), []string{"ok", ""})
	require.True(t, errors.Is(err, embed.ErrEmpty))
	require.EqualValues(t, 3, fake.requests.Load(), "bad input sends nothing")
}
