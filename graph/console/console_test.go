package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/toolgate/toolgate/graph/console"
)

func get(t *testing.T, srv *httptest.Server, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	return res, string(b)
}

// The page names only its own assets, under a policy that allows scripts
// and styles of this server only (the import map by its hash) and no inline
// style; the assets are served with their licences and the types a module
// script needs.
func TestPageServesItsAssets(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(console.Handler("/admin", "/graphql"))
	t.Cleanup(srv.Close)

	res, page := get(t, srv, "/admin", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `<script type="module" src="/admin/assets/app.js"></script>`)
	require.Contains(t, page, `"preact":"/admin/assets/preact.mjs"`)
	require.Contains(t, page, `data-endpoint="/graphql"`)
	require.NotRegexp(t, `(src|href)="(https?:)?//`, page, "nothing from elsewhere")
	csp := res.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "script-src 'self' 'sha256-")
	require.Contains(t, csp, "style-src 'self';")
	require.NotContains(t, csp, "unsafe")
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))

	tests := []struct{ give, wantType string }{
		{give: "/admin/assets/app.js", wantType: "text/javascript; charset=utf-8"},
		{give: "/admin/assets/preact.mjs", wantType: "text/javascript; charset=utf-8"},
		{give: "/admin/assets/hooks.mjs", wantType: "text/javascript; charset=utf-8"},
		{give: "/admin/assets/htm.mjs", wantType: "text/javascript; charset=utf-8"},
		{give: "/admin/assets/console.css", wantType: "text/css; charset=utf-8"},
		{give: "/admin/assets/LICENSE.preact", wantType: "text/plain; charset=utf-8"},
		{give: "/admin/assets/LICENSE.htm", wantType: "text/plain; charset=utf-8"},
		{give: "/admin/ops/usage.graphql", wantType: "application/graphql; charset=utf-8"},
	}
	for _, tt := range tests {
		res, body := get(t, srv, tt.give, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, tt.give)
		require.Equal(t, tt.wantType, res.Header.Get("Content-Type"), tt.give)
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"), tt.give)
		require.NotEmpty(t, body, tt.give)
		again, _ := get(t, srv, tt.give, http.Header{"If-None-Match": {res.Header.Get("ETag")}})
		require.Equal(t, http.StatusNotModified, again.StatusCode, "revalidated by its ETag: %s", tt.give)
	}
	for _, path := range []string{"/admin/assets/nothing.js", "/admin/assets/", "/admin/ops/nothing.graphql"} {
		res, _ := get(t, srv, path, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, path)
	}
	res, _ = get(t, srv, "/admin/", nil)
	require.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	require.Equal(t, "/admin", res.Header.Get("Location"))
}

// mutations are the console's documents that change something.
var mutations = map[string]bool{"revoke_token": true, "set_role": true, "deactivate_user": true, "reactivate_user": true,
	"update_agent": true, "archive_agent": true, "delete_agent": true, "delete_knowledge_base": true, "delete_document": true, "delete_skill": true}

// Every document is one named operation, parsed; app.js names each by its
// file. Reads are queries; the mutations are the People & tokens view's,
// the Agents view's and the Knowledge & skills view's.
func TestOperationsAreNamedQueries(t *testing.T) {
	t.Parallel()
	ops := console.Operations()
	require.Len(t, ops, 24)
	for name, doc := range ops {
		q, err := parser.ParseQuery(&ast.Source{Name: name, Input: doc})
		require.Nil(t, err, name)
		require.Len(t, q.Operations, 1, name)
		want := ast.Query
		if mutations[name] {
			want = ast.Mutation
		}
		require.Equal(t, want, q.Operations[0].Operation, name)
		require.NotEmpty(t, q.Operations[0].Name, name)
	}
}
