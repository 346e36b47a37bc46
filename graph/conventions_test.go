package graph_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/toolgate/toolgate/graph/generated"
)

// schema is the server's schema as clients introspect it.
func schema(t *testing.T) *ast.Schema {
	t.Helper()
	return generated.NewExecutableSchema(generated.Config{}).Schema()
}

// mutationExceptions are the mutations that predate the convention (one
// argument named input, of an input object type, in; an object type out).
// They stay as they are for today's clients; the list only ever shrinks.
var mutationExceptions = map[string]string{
	"cancelTurn":         "id in: part of the public contract",
	"deleteConversation": "id in, ID out: part of the public contract",
	"forgetMemory":       "id in: part of the public contract",
	"revokeAPIToken":     "id in: an existing client's shape",
	"archiveAgent":       "id in, Agent out: the shape the public contract gives it",
	"deleteAgent":        "id in, ID out: the shape the public contract gives it",
	"regenerateTurn":     "id in, Turn out: the shape the public contract gives it",
	"runCode":            "a tool field: the arguments are the tool's own, as the model writes them",
	"suggestNextActions": "a tool field: the arguments are the tool's own, as the model writes them",
	"writeFiles":         "a tool field: the arguments are the tool's own, as the model writes them",
	"editFile":           "a tool field: the arguments are the tool's own, as the model writes them",
	"createArtifact":     "a tool field: the arguments are the tool's own, as the model writes them",
	"rewriteArtifact":    "a tool field: the arguments are the tool's own, as the model writes them",
	"updateArtifact":     "a tool field: the arguments are the tool's own, as the model writes them",
	"inspectArtifact":    "a tool field: the arguments are the tool's own, as the model writes them",
	"printPdf":           "a tool field: the arguments are the tool's own, as the model writes them",
	"deleteFile":         "a tool field: the arguments are the tool's own, as the model writes them",
	"memoryWrite":        "a tool field: the arguments are the tool's own, as the model writes them",
	"memoryForget":       "a tool field: the arguments are the tool's own, as the model writes them",
}

func TestMutationConvention(t *testing.T) {
	t.Parallel()
	s := schema(t)
	var breaking []string
	for _, f := range s.Mutation.Fields {
		if strings.HasPrefix(f.Name, "__") {
			continue
		}
		if _, ok := mutationExceptions[f.Name]; ok {
			continue
		}
		in := len(f.Arguments) == 1 && f.Arguments[0].Name == "input" && f.Arguments[0].Type.NonNull &&
			s.Types[f.Arguments[0].Type.Name()].Kind == ast.InputObject
		out := s.Types[f.Type.Name()].Kind == ast.Object
		if !in || !out {
			breaking = append(breaking, f.Name)
		}
	}
	sort.Strings(breaking)
	require.Empty(t, breaking, "a mutation takes one argument, input: SomeInput!, and returns an object (payload) type; see the README")
	for name, why := range mutationExceptions {
		if strings.Contains(why, "public contract") {
			continue // the contract names it; its family may not have landed yet
		}
		require.NotNil(t, s.Mutation.Fields.ForName(name), "exception %s no longer exists: drop it from the list", name)
	}
}

// A nullable conversationId says in its own description what an API token
// must do, so a client learns the rule from introspection.
func TestConversationIDDocumented(t *testing.T) {
	t.Parallel()
	s := schema(t)
	n := 0
	for _, root := range []*ast.Definition{s.Query, s.Mutation} {
		for _, f := range root.Fields {
			a := f.Arguments.ForName("conversationId")
			if a == nil || a.Type.NonNull {
				continue
			}
			n++
			require.Contains(t, a.Description, "API token", "%s.%s(conversationId)", root.Name, f.Name)
		}
	}
	require.Greater(t, n, 10)
}

// Old shapes stay, deprecated with a reason that names the way to use.
func TestDeprecatedNameTheirReplacement(t *testing.T) {
	t.Parallel()
	s := schema(t)
	tests := []struct {
		typ, field, want string
	}{
		{"Query", "readToolResult", "toolResults"},
		{"Query", "searchToolResults", "toolResults"},
		{"SuggestionsAck", "ok", "suggestions"},
	}
	for _, tt := range tests {
		d := s.Types[tt.typ].Fields.ForName(tt.field).Directives.ForName("deprecated")
		require.NotNil(t, d, "%s.%s", tt.typ, tt.field)
		require.Contains(t, d.Arguments.ForName("reason").Value.Raw, tt.want)
	}
	for _, v := range s.Types["MatchMode"].EnumValues {
		d := v.Directives.ForName("deprecated")
		if v.Name == strings.ToUpper(v.Name) {
			require.Nil(t, d, v.Name)
		} else {
			require.NotNil(t, d, v.Name)
			require.Contains(t, d.Arguments.ForName("reason").Value.Raw, strings.ToUpper(v.Name))
		}
	}
}
