package repair_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/repair"
	"github.com/toolgate/toolgate/tools/tooltest"
)

// treeSchema refers to itself, so a careless rule could recurse for ever.
const treeSchema = `{
	"$defs": {
		"node": {
			"type": "object",
			"properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
			"required": ["name"],
			"additionalProperties": false
		}
	},
	"$ref": "#/$defs/node"
}`

// nullableSchema is the shape generators give optional lists.
const nullableSchema = `{
	"type": "object",
	"properties": {
		"edits": {"anyOf": [{"type": "array", "items": {"type": "object", "properties": {"old": {"type": "string"}, "new": {"type": "string"}}, "required": ["old", "new"]}}, {"type": "null"}]},
		"path": {"type": "string"}
	},
	"required": ["path"],
	"additionalProperties": false
}`

// FuzzFix checks, against several schemas, that Fix never panics, that
// whatever it lets through fits the schema as an independent compile of it
// sees it, and that a call it did not repair goes on byte for byte.
func FuzzFix(f *testing.F) {
	schemas := []string{searchSchema, writeSchema, twoListsSchema, unionSchema, refSchema, draft7Schema, treeSchema, nullableSchema}
	tools := make([]*repair.Tool, len(schemas))
	checks := make([]*jsonschema.Schema, len(schemas))
	for i, s := range schemas {
		var err error
		tools[i], err = repair.Compile("fuzz", json.RawMessage(s))
		require.NoError(f, err)
		checks[i] = tooltest.Schema(f, json.RawMessage(s))
	}
	for _, seed := range []string{
		``, `null`, `""`, `{}`, `[]`, `"x"`, `7`,
		`{"queries": "[\"a\",\"b\"]"}`,
		`{"queries": "a", "limit": 2}`,
		`{"queries": ["a"], "match": "exact"}`,
		`{"path": "a", "content": "b", "tags": "x"}`,
		`{"files": {"path": "a", "content": "b"}}`,
		`{"files": [{"path": "a", "content": "b", "tags": "[\"x\"]"}]}`,
		`{"q": "[\"a\"]", "n": 3, "ids": 4, "item": {"path": "a"}}`,
		`"{\"queries\": \"a\"}"`,
		`"\"{\\\"names\\\": \\\"a\\\"}\""`,
		`{"name": "root", "children": {"name": "leaf", "children": "[{\"name\": \"x\"}]"}}`,
		`{"name": "root", "x": 1, "children": [{"name": "a", "y": [2]}]}`,
		`{"path": "f.go", "old": "a", "new": "b"}`,
		`{"path": "f.go", "edits": "[{\"old\": \"a\", \"new\": \"b\"}]"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		for i, tool := range tools {
			fixed, repairs, err := tool.Fix(args)
			if err != nil {
				var argErr *repair.ArgumentError
				require.ErrorAs(t, err, &argErr)
				require.NotEmpty(t, argErr.Error())
				continue
			}
			if len(repairs) == 0 {
				require.Equal(t, args, []byte(fixed))
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(fixed))
			require.NoError(t, err)
			require.NoError(t, checks[i].Validate(v), "schema %d let through %s", i, fixed)
		}
	})
}
