package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
)

// `toolgate schema` prints the SDL the server serves: a schema that
// parses, with the three roots.
func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"schema"}, &out, io.Discard))
	require.Equal(t, graph.SDL(), out.String())
	doc, err := parser.ParseSchema(&ast.Source{Name: "schema", Input: out.String()})
	require.Nil(t, err)
	names := map[string]bool{}
	for _, d := range doc.Definitions {
		names[d.Name] = true
	}
	for _, root := range []string{"Query", "Mutation", "Subscription"} {
		require.True(t, names[root], root)
	}
}

// The portal's flags refuse what cannot work, with the setting to change.
func TestPortalFlagsRefuse(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, dbtest.SQLite)
	for args, want := range map[string]string{
		"--cors-origins=*":                                    "every origin cannot be allowed",
		"--cors-origins=localhost:3000":                       "want http://HOST[:PORT]",
		"--oidc-issuer=https://login.example.com":             "an issuer needs an audience",
		"--sessions=true":                                     "set TOOLGATE_OIDC_ISSUER too",
		"--oidc-issuer=https://x.example --oidc-audience=api": "one of the two",
		"--rate-turns-at-once=-1":                             "0 (none) or more",
	} {
		var pf portalFlags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		pf.register(fs)
		require.NoError(t, fs.Parse(splitArgs(args)))
		_, err := pf.config(d, nil)
		require.ErrorContains(t, err, want, args)
	}
	var pf portalFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	pf.register(fs)
	require.NoError(t, fs.Parse(nil))
	cfg, err := pf.config(d, nil)
	require.NoError(t, err)
	require.Equal(t, graph.DefaultRequestsPerSecond, cfg.RequestsPerSecond)
	require.Equal(t, graph.DefaultTurnsAtOnce, cfg.TurnsAtOnce)
	require.True(t, cfg.CORSOrigins.Empty())
	require.Nil(t, cfg.OIDC)
}

func splitArgs(s string) []string {
	var out []string
	for _, a := range bytes.Fields([]byte(s)) {
		out = append(out, string(a))
	}
	return out
}
