package playground_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/graph/playground"
)

// The embedded files are the npm packages' own: their hashes are the ones
// gqlgen's page pins for the same versions on the CDN.
func TestAssetsMatchGqlgenPins(t *testing.T) {
	t.Parallel()
	tests := []struct{ give, want string }{
		{give: "graphiql.min.js", want: "sha256-hnImuor1znlJkD/FOTL3jayfS/xsyNoP04abi8bFJWs="},
		{give: "graphiql.min.css", want: "sha256-MEh+B2NdMSpj9kexQNN3QKc8UzMrCXW/Sx/phcpuyIU="},
		{give: "react.production.min.js", want: "sha256-S0lp+k7zWUMk2ixteM6HZvu8L9Eh//OVrt+ZfbCpmgY="},
		{give: "react-dom.production.min.js", want: "sha256-IXWO0ITNDjfnNXIu5POVfqlgYoop36bDzhodR6LW5Pc="},
		{give: "plugin-explorer.umd.js", want: "sha256-UM8sWOS0Xa9yLY85q6Clh0pF4qpxX+TOcJ41flECqBs="},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, playground.SRI(tt.give), tt.give)
	}
}

// The page names only its own assets, each with its hash, and they are
// served with their licences beside them.
func TestPageServesItsAssets(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(playground.Handler("toolgate", "/playground", "/graphql", nil))
	t.Cleanup(srv.Close)
	get := func(path string) (*http.Response, string) {
		res, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		res.Body.Close()
		return res, string(b)
	}
	res, page := get("/playground")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, `src="/playground/assets/graphiql.min.js"`)
	require.Contains(t, page, playground.SRI("graphiql.min.js"))
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'none'")
	for _, path := range []string{"/playground/assets/react.production.min.js", "/playground/assets/LICENSE.graphiql", "/playground/assets/LICENSE.react", "/playground/assets/LICENSE.plugin-explorer"} {
		res, body := get(path)
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.NotEmpty(t, body, path)
	}
	res, _ = get("/playground/assets/nothing.js")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}
