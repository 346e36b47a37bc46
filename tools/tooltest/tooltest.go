// Package tooltest holds what the tool families' tests share: a tool's JSON
// Schema compiled as a validator reads it, to check the arguments a model
// may send against what the definition promises.
package tooltest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// Schema compiles raw (a tool's JSON Schema), failing t when it is not a
// schema.
func Schema(t testing.TB, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	s, err := c.Compile("schema.json")
	require.NoError(t, err)
	return s
}

// Valid reports whether the JSON text give satisfies s, failing t when
// give is not JSON.
func Valid(t testing.TB, s *jsonschema.Schema, give string) bool {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(give), &v), give)
	return s.Validate(v) == nil
}
