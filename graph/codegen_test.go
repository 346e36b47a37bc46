package graph_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
)

// graphql-codegen, as a portal team runs it, generates typed documents (a
// query, a mutation and a subscription) from the schema the server serves
// without a token; a document asking for a field the schema does not have
// fails to generate.
func TestCodegenFromServedSchema(t *testing.T) {
	t.Parallel()
	dir := npmPackage(t, "codegen")
	b := setupWith(t, dbtest.Open(t, dbtest.SQLite), func(c *graph.Config) { c.Portal.SchemaEndpoint = true })
	res, err := http.Get(b.srv.URL + "/graphql/schema.graphql")
	require.NoError(t, err)
	sdl, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)

	work := t.TempDir()
	schema := filepath.Join(work, "schema.graphql")
	require.NoError(t, os.WriteFile(schema, sdl, 0o644))
	ops, err := os.ReadFile(filepath.Join("testdata", "codegen", "operations.graphql"))
	require.NoError(t, err)
	generate := func(documents string) (string, error) {
		docs := filepath.Join(work, "operations.graphql")
		require.NoError(t, os.WriteFile(docs, []byte(documents), 0o644))
		out := filepath.Join(work, "graphql.ts")
		_ = os.Remove(out)
		config := filepath.Join(work, "codegen.yml")
		require.NoError(t, os.WriteFile(config, []byte(`schema: `+schema+`
documents: `+docs+`
generates:
  `+out+`:
    plugins: [typescript, typescript-operations, typed-document-node]
    config:
      scalars: {Time: string, Cursor: string, Upload: File, Int64: number, FieldStep: "string | number", JSONSchema: "Record<string, unknown>"}
`), 0o644))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "graphql-codegen"), "--config", config)
		cmd.Dir = dir
		msg, err := cmd.CombinedOutput()
		if err != nil {
			return string(msg), err
		}
		ts, err := os.ReadFile(out)
		require.NoError(t, err)
		return string(ts), nil
	}
	ts, err := generate(string(ops))
	require.NoError(t, err, ts)
	for _, want := range []string{
		"export type ViewerQuery = ",
		"export const ViewerDocument = ",
		"DocumentNode<ViewerQuery, ViewerQueryVariables>",
		"export type SendMessageMutationVariables = Exact<{",
		"DocumentNode<SendMessageMutation, SendMessageMutationVariables>",
		"DocumentNode<TurnEventsSubscription, TurnEventsSubscriptionVariables>",
		"export enum TurnStatus {",
	} {
		require.Contains(t, ts, want)
	}

	msg, err := generate(string(ops) + "\nquery Bad { viewer { favouriteColour } }\n")
	require.Error(t, err)
	require.True(t, strings.Contains(msg, "favouriteColour"), msg)
}
