package graph

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/graph/generated"
)

// TestTranscriptFieldsServed walks the schema's transcript types and fails
// for a field the hot path neither writes nor names in resolvedFields, the
// one list of what falls back to the resolvers: a field added to these
// types must be served, or named there.
func TestTranscriptFieldsServed(t *testing.T) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	for _, typ := range transcriptTypes {
		def := schema.Types[typ]
		if def == nil {
			t.Fatalf("no type %s in the schema", typ)
		}
		for _, f := range def.Fields {
			if _, fast := fastTypes[typ][f.Name]; fast {
				continue
			}
			if !slices.Contains(resolvedFields[typ], f.Name) {
				t.Errorf("%s.%s falls back to the resolvers without being named in resolvedFields", typ, f.Name)
			}
		}
	}
	for typ, names := range resolvedFields {
		for _, name := range names {
			if schema.Types[typ].Fields.ForName(name) == nil {
				t.Errorf("resolvedFields names %s.%s, which the schema has not", typ, name)
			}
		}
	}
}
