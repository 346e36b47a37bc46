package graph_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// TestAPIOutlineMatchesSchema: the outline of the API in docs/api.md names
// the three roots, and every field it names exists in the schema with the
// arguments and the type the outline gives it.
func TestAPIOutlineMatchesSchema(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	readme := string(raw)
	start := strings.Index(readme, "the outline:\n\n```graphql\n")
	require.GreaterOrEqual(t, start, 0, "docs/api.md has an outline of the schema")
	outline := readme[start+len("the outline:\n\n```graphql\n"):]
	outline = outline[:strings.Index(outline, "```")]
	doc, gerr := parser.ParseSchema(&ast.Source{Name: "README outline", Input: outline})
	require.Nil(t, gerr, "the outline is valid GraphQL")

	s := schema(t)
	roots := map[string]bool{}
	for _, def := range doc.Definitions {
		roots[def.Name] = true
		have := s.Types[def.Name]
		require.NotNil(t, have, "the outline's type %s is in the schema", def.Name)
		require.NotEmpty(t, def.Fields, "the outline's %s names fields", def.Name)
		for _, f := range def.Fields {
			got := have.Fields.ForName(f.Name)
			require.NotNil(t, got, "the outline's %s.%s is in the schema", def.Name, f.Name)
			require.Equal(t, got.Type.String(), f.Type.String(), "type of %s.%s", def.Name, f.Name)
			for _, a := range f.Arguments {
				ga := got.Arguments.ForName(a.Name)
				require.NotNil(t, ga, "the outline's %s.%s(%s) is in the schema", def.Name, f.Name, a.Name)
				require.Equal(t, ga.Type.String(), a.Type.String(), "type of %s.%s(%s)", def.Name, f.Name, a.Name)
			}
			for _, ga := range got.Arguments {
				if ga.Type.NonNull && ga.DefaultValue == nil {
					require.NotNil(t, f.Arguments.ForName(ga.Name), "the outline's %s.%s lists its required argument %s", def.Name, f.Name, ga.Name)
				}
			}
		}
	}
	for _, root := range []string{"Query", "Mutation", "Subscription"} {
		require.True(t, roots[root], "the outline lists %s", root)
	}
}
