package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/web"
)

// TestProviders drives each adapter against a server answering in that
// provider's own response format, and checks the request it sent.
func TestProviders(t *testing.T) {
	t.Parallel()
	want := []web.Hit{
		{Title: "go-shiori/go-readability: Go package that cleans a HTML page for better readability.", URL: "https://github.com/go-shiori/go-readability",
			Snippet: "Go package that cleans a HTML page for better readability. Contribute to go-shiori/go-readability development by creating an account on GitHub."},
		{Title: "readeck/go-readability - Codeberg.org", URL: "https://codeberg.org/readeck/go-readability", Snippet: "A Go port of Mozilla's Readability.js, maintained by Readeck."},
	}
	tests := []struct {
		name    string
		fixture string
		key     string
		check   func(t *testing.T, r *http.Request)
		want    []web.Hit
	}{
		{
			name: web.SearXNG, fixture: "testdata/searxng.json",
			check: func(t *testing.T, r *http.Request) {
				require.Equal(t, http.MethodGet, r.Method)
				require.Equal(t, "/base/search", r.URL.Path)
				require.Equal(t, "go readability", r.URL.Query().Get("q"))
				require.Equal(t, "json", r.URL.Query().Get("format"))
			},
			// The magnet: result is dropped: only http(s) pages are hits.
			want: want,
		},
		{
			name: web.Brave, fixture: "testdata/brave.json", key: "brave-key",
			check: func(t *testing.T, r *http.Request) {
				require.Equal(t, http.MethodGet, r.Method)
				require.Equal(t, "/base", r.URL.Path)
				require.Equal(t, "go readability", r.URL.Query().Get("q"))
				require.Equal(t, "5", r.URL.Query().Get("count"))
				require.Equal(t, "brave-key", r.Header.Get("X-Subscription-Token"))
			},
			// Brave marks matches with <strong> and escapes entities.
			want: []web.Hit{
				{Title: "GitHub - go-shiori/go-readability", URL: "https://github.com/go-shiori/go-readability", Snippet: "Go package that cleans a HTML page for better readability & more."},
				{Title: "readeck/go-readability - Codeberg.org", URL: "https://codeberg.org/readeck/go-readability", Snippet: "A Go port of Mozilla's Readability.js."},
			},
		},
		{
			name: web.Tavily, fixture: "testdata/tavily.json", key: "tvly-key",
			check: func(t *testing.T, r *http.Request) {
				require.Equal(t, http.MethodPost, r.Method)
				require.Equal(t, "/base", r.URL.Path)
				require.Equal(t, "Bearer tvly-key", r.Header.Get("Authorization"))
				var body map[string]any
				require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
				require.Equal(t, "go readability", body["query"])
				require.EqualValues(t, 5, body["max_results"])
			},
			want: []web.Hit{
				{Title: "go-shiori/go-readability: Go package that cleans a HTML page", URL: "https://github.com/go-shiori/go-readability", Snippet: "Go package that cleans a HTML page for better readability."},
				{Title: "readeck/go-readability - Codeberg.org", URL: "https://codeberg.org/readeck/go-readability", Snippet: "A Go port of Mozilla's Readability.js."},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fixture, err := os.ReadFile(tt.fixture)
			require.NoError(t, err)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tt.check(t, r)
				require.Equal(t, web.UserAgent, r.Header.Get("User-Agent"))
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(fixture)
			}))
			t.Cleanup(srv.Close)
			p, err := web.NewProvider(tt.name, srv.URL+"/base", tt.key, srv.Client())
			require.NoError(t, err)
			require.Equal(t, tt.name, p.Name())
			hits, err := p.Search(context.Background(), "go readability", 5)
			require.NoError(t, err)
			require.Equal(t, tt.want, hits)
		})
	}
}

// TestProviderFailures: a provider that is down or refuses never ran the
// search; one that answered nonsense ran and failed.
func TestProviderFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		body      string
		malformed bool
	}{
		{name: "unavailable", status: http.StatusServiceUnavailable, body: `{}`},
		{name: "bad key", status: http.StatusUnauthorized, body: `{"error":"unauthorized"}`},
		{name: "not json", status: http.StatusOK, body: `<html>`, malformed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			p, err := web.NewProvider(web.SearXNG, srv.URL, "", srv.Client())
			require.NoError(t, err)
			_, err = p.Search(context.Background(), "q", 5)
			require.Error(t, err)
			var m *web.MalformedError
			require.Equal(t, tt.malformed, errorsAs(err, &m))
		})
	}
}

func TestNewProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give, url, key string
		wantErr        string
	}{
		{give: "searxng", wantErr: "TOOLGATE_WEB_PROVIDER_URL is required"},
		{give: "searxng", url: "ftp://x", wantErr: "is not an http(s) URL"},
		{give: "brave", wantErr: "TOOLGATE_WEB_PROVIDER_KEY is required"},
		{give: "tavily", wantErr: "TOOLGATE_WEB_PROVIDER_KEY is required"},
		{give: "bing", key: "k", wantErr: `unknown provider "bing"`},
		{give: "Brave", key: "k"},
		{give: "searxng", url: "http://searx.internal:8888"},
	}
	for _, tt := range tests {
		_, err := web.NewProvider(tt.give, tt.url, tt.key, nil)
		if tt.wantErr == "" {
			require.NoError(t, err, tt.give)
			continue
		}
		require.ErrorContains(t, err, tt.wantErr, tt.give)
	}
	s, err := web.New(web.Config{})
	require.NoError(t, err)
	require.Nil(t, s, "no provider configured: no service")
	_, err = web.New(web.Config{Provider: "searxng", URL: "http://x", AllowPrivate: "not-a-cidr"})
	require.ErrorContains(t, err, "TOOLGATE_WEB_ALLOW_PRIVATE")
}
