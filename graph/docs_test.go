package graph_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
)

// TestDocsGraphQLIsValid: every GraphQL example in the README and in
// docs/ is valid against the schema, each operation on its own with the
// fragments beside it. The schema outline (SDL) is checked by
// TestAPIOutlineMatchesSchema.
func TestDocsGraphQLIsValid(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	files = append(files, "../README.md")
	s := schema(t)
	block := regexp.MustCompile("(?s)```graphql\n(.*?)```")
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range block.FindAllStringSubmatch(string(raw), -1) {
			src := m[1]
			if first := strings.Fields(src); len(first) > 0 && (first[0] == "type" || first[0] == "schema") {
				continue
			}
			doc, perr := parser.ParseQuery(&ast.Source{Name: f, Input: src})
			require.Nil(t, perr, "%s: an example is not GraphQL:\n%s", f, src)
			require.NotEmpty(t, doc.Operations, "%s: an example without an operation:\n%s", f, src)
			for _, op := range doc.Operations {
				one := &ast.QueryDocument{Operations: ast.OperationList{op}, Fragments: doc.Fragments}
				errs := validator.ValidateWithRules(s, one, nil)
				require.Empty(t, errs, "%s: an example does not fit the schema:\n%s", f, src)
				checked++
			}
		}
	}
	require.Greater(t, checked, 20, "the docs' examples were found")
}
