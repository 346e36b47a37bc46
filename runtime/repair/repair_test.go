package repair_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/runtime/repair"
)

const searchSchema = `{
	"type": "object",
	"properties": {
		"queries": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
		"limit": {"type": "integer", "minimum": 1},
		"match": {"enum": ["exact", "fuzzy"]}
	},
	"required": ["queries"],
	"additionalProperties": false
}`

const writeSchema = `{
	"type": "object",
	"properties": {
		"files": {
			"type": "array",
			"maxItems": 3,
			"items": {
				"type": "object",
				"properties": {
					"path": {"type": "string"},
					"content": {"type": "string"},
					"tags": {"type": "array", "items": {"type": "string"}}
				},
				"required": ["path", "content"],
				"additionalProperties": false
			}
		}
	},
	"required": ["files"],
	"additionalProperties": false
}`

// twoListsSchema has two lists of objects either of which could take a
// flattened element: rule 3's ambiguous twin.
const twoListsSchema = `{
	"type": "object",
	"properties": {
		"files": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}},
		"links": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}}}}
	},
	"additionalProperties": false
}`

// unionSchema's "q" takes a string or a list as sent, so neither rule 1 nor
// rule 2 may touch it; "item" can be read as a list (rule 2) or folded into
// an object's list (rule 3): two readings, so neither fires.
const unionSchema = `{
	"type": "object",
	"properties": {
		"q": {"type": ["string", "array"], "items": {"type": "string"}},
		"n": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
		"item": {"anyOf": [
			{"type": "array", "items": {"type": "object"}},
			{"type": "object", "properties": {"list": {"type": "array", "items": {"type": "object"}}}, "required": ["list"], "additionalProperties": false}
		]},
		"ids": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "boolean"}]}
	},
	"additionalProperties": false
}`

// refSchema reaches its lists through $ref, as generated schemas do.
const refSchema = `{
	"$defs": {
		"file": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"], "additionalProperties": false},
		"files": {"type": "array", "items": {"$ref": "#/$defs/file"}}
	},
	"type": "object",
	"properties": {"files": {"$ref": "#/$defs/files"}, "dryRun": {"type": "boolean"}},
	"required": ["files"],
	"additionalProperties": false
}`

// draft7Schema is how many MCP servers still write theirs.
const draft7Schema = `{
	"$schema": "http://json-schema.org/draft-07/schema#",
	"type": "object",
	"properties": {"names": {"type": "array", "items": {"type": "string"}}, "code": {"type": "string"}},
	"required": ["names"]
}`

const noArgsSchema = `{"type": "object", "properties": {}, "additionalProperties": false}`

func compile(t *testing.T, schema string) *repair.Tool {
	t.Helper()
	tool, err := repair.Compile("tool", json.RawMessage(schema))
	require.NoError(t, err)
	return tool
}

// brief lists repairs as "rule path", which is what the tests pin down.
func brief(repairs []repair.Repair) []string {
	out := []string{}
	for _, r := range repairs {
		out = append(out, fmt.Sprintf("%d %s", r.Rule, r.Path))
	}
	return out
}

func TestFix(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name        string
		schema      string
		give        string
		want        string
		wantRepairs []string
	}{
		{
			name:        "rule 1: list sent as JSON text",
			schema:      searchSchema,
			give:        `{"queries": "[\"a\",\"b\"]"}`,
			want:        `{"queries": ["a", "b"]}`,
			wantRepairs: []string{"1 queries"},
		},
		{
			name:        "rule 1 twin: the union takes the text as sent",
			schema:      unionSchema,
			give:        `{"q": "[\"a\"]"}`,
			want:        `{"q": "[\"a\"]"}`,
			wantRepairs: []string{},
		},
		{
			name:        "rule 2: one element sent as itself",
			schema:      searchSchema,
			give:        `{"queries": "a", "limit": 3}`,
			want:        `{"queries": ["a"], "limit": 3}`,
			wantRepairs: []string{"2 queries"},
		},
		{
			name:        "rule 2 twin: the union takes the element as sent",
			schema:      unionSchema,
			give:        `{"q": "a"}`,
			want:        `{"q": "a"}`,
			wantRepairs: []string{},
		},
		{
			name:        "rule 2 inside a union with one reading",
			schema:      unionSchema,
			give:        `{"ids": 7}`,
			want:        `{"ids": [7]}`,
			wantRepairs: []string{"2 ids"},
		},
		{
			name:        "rule 2 on an object",
			schema:      writeSchema,
			give:        `{"files": {"path": "a.txt", "content": "hi"}}`,
			want:        `{"files": [{"path": "a.txt", "content": "hi"}]}`,
			wantRepairs: []string{"2 files"},
		},
		{
			name:        "rule 3: one element flattened into the call",
			schema:      writeSchema,
			give:        `{"path": "a.txt", "content": "hi"}`,
			want:        `{"files": [{"path": "a.txt", "content": "hi"}]}`,
			wantRepairs: []string{"3 files"},
		},
		{
			name:        "nested: rule 2 inside a list item",
			schema:      writeSchema,
			give:        `{"files": [{"path": "a", "content": "b", "tags": "x"}, {"path": "c", "content": "d"}]}`,
			want:        `{"files": [{"path": "a", "content": "b", "tags": ["x"]}, {"path": "c", "content": "d"}]}`,
			wantRepairs: []string{"2 files[0].tags"},
		},
		{
			name:        "nested: rule 1 inside a list item",
			schema:      writeSchema,
			give:        `{"files": [{"path": "a", "content": "b", "tags": " [\"x\", \"y\"] "}]}`,
			want:        `{"files": [{"path": "a", "content": "b", "tags": ["x", "y"]}]}`,
			wantRepairs: []string{"1 files[0].tags"},
		},
		{
			name:        "nested: rule 3 then rule 2 inside the folded element",
			schema:      writeSchema,
			give:        `{"path": "a", "content": "b", "tags": "x"}`,
			want:        `{"files": [{"path": "a", "content": "b", "tags": ["x"]}]}`,
			wantRepairs: []string{"3 files", "2 files[0].tags"},
		},
		{
			name:        "nested: rule 2 then rule 2 inside the wrapped element",
			schema:      writeSchema,
			give:        `{"files": {"path": "a", "content": "b", "tags": "x"}}`,
			want:        `{"files": [{"path": "a", "content": "b", "tags": ["x"]}]}`,
			wantRepairs: []string{"2 files", "2 files[0].tags"},
		},
		{
			name:        "through $ref",
			schema:      refSchema,
			give:        `{"path": "a", "content": "b", "dryRun": true}`,
			want:        `{"files": [{"path": "a", "content": "b"}], "dryRun": true}`,
			wantRepairs: []string{"3 files"},
		},
		{
			name:        "rule 3 into a nullable list",
			schema:      nullableSchema,
			give:        `{"path": "f.go", "old": "a", "new": "b"}`,
			want:        `{"path": "f.go", "edits": [{"old": "a", "new": "b"}]}`,
			wantRepairs: []string{"3 edits"},
		},
		{
			name:        "rule 1 into a nullable list",
			schema:      nullableSchema,
			give:        `{"path": "f.go", "edits": "[{\"old\": \"a\", \"new\": \"b\"}]"}`,
			want:        `{"path": "f.go", "edits": [{"old": "a", "new": "b"}]}`,
			wantRepairs: []string{"1 edits"},
		},
		{
			name:        "a recursive schema",
			schema:      treeSchema,
			give:        `{"name": "root", "children": {"name": "a", "children": "[{\"name\": \"b\"}]"}}`,
			want:        `{"name": "root", "children": [{"name": "a", "children": [{"name": "b"}]}]}`,
			wantRepairs: []string{"2 children", "1 children[0].children"},
		},
		{
			name:        "draft-07 schema",
			schema:      draft7Schema,
			give:        `{"names": "[\"a\"]"}`,
			want:        `{"names": ["a"]}`,
			wantRepairs: []string{"1 names"},
		},
		{
			name:        "doubly encoded arguments",
			schema:      searchSchema,
			give:        `"{\"queries\": [\"a\"]}"`,
			want:        `{"queries": ["a"]}`,
			wantRepairs: []string{"5 "},
		},
		{
			name:        "doubly encoded arguments, then rule 2",
			schema:      searchSchema,
			give:        `"{\"queries\": \"a\"}"`,
			want:        `{"queries": ["a"]}`,
			wantRepairs: []string{"5 ", "2 queries"},
		},
		{
			name:        "empty arguments",
			schema:      noArgsSchema,
			give:        ``,
			want:        `{}`,
			wantRepairs: []string{"4 "},
		},
		{
			name:        "null arguments",
			schema:      noArgsSchema,
			give:        `null`,
			want:        `{}`,
			wantRepairs: []string{"4 "},
		},
		{
			name:        "empty string arguments",
			schema:      noArgsSchema,
			give:        `""`,
			want:        `{}`,
			wantRepairs: []string{"4 "},
		},
		{
			name:        "a valid call is not touched",
			schema:      searchSchema,
			give:        `{"queries": ["a", "b"], "match": "exact"}`,
			want:        `{"queries": ["a", "b"], "match": "exact"}`,
			wantRepairs: []string{},
		},
		{
			name:        "empty schema takes any object",
			schema:      ``,
			give:        `{"anything": [1, {"x": null}]}`,
			want:        `{"anything": [1, {"x": null}]}`,
			wantRepairs: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := compile(t, tt.schema)

			got, repairs, err := tool.Fix(json.RawMessage(tt.give))
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(got))
			require.Equal(t, tt.wantRepairs, brief(repairs))
		})
	}
}

func TestFixRefuses(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name        string
		schema      string
		give        string
		wantArgs    string
		wantRepairs []string
		wantErr     string
	}{
		{
			name:        "wrong type, no rule fits",
			schema:      searchSchema,
			give:        `{"queries": 5}`,
			wantArgs:    `{"queries": 5}`,
			wantRepairs: []string{},
			wantErr:     `argument "queries": expected an array of strings, got a number`,
		},
		{
			name:        "rule 1 does not fit the items",
			schema:      searchSchema,
			give:        `{"queries": "[1, 2]"}`,
			wantArgs:    `{"queries": "[1, 2]"}`,
			wantRepairs: []string{},
			wantErr:     `argument "queries": expected an array of strings, got a string`,
		},
		{
			name:        "null is not read as a list",
			schema:      searchSchema,
			give:        `{"queries": null}`,
			wantArgs:    `{"queries": null}`,
			wantRepairs: []string{},
			wantErr:     `argument "queries": expected an array of strings, got null`,
		},
		{
			name:        "missing required argument",
			schema:      searchSchema,
			give:        `{"limit": 2}`,
			wantArgs:    `{"limit": 2}`,
			wantRepairs: []string{},
			wantErr:     `missing required argument "queries"`,
		},
		{
			name:        "empty arguments, then missing",
			schema:      searchSchema,
			give:        ` `,
			wantArgs:    `{}`,
			wantRepairs: []string{"4 "},
			wantErr:     `missing required argument "queries"`,
		},
		{
			name:        "unknown argument names the known ones",
			schema:      searchSchema,
			give:        `{"queries": ["a"], "foo": 1}`,
			wantArgs:    `{"queries": ["a"], "foo": 1}`,
			wantRepairs: []string{},
			wantErr:     `unknown argument "foo" (known: "limit", "match", "queries")`,
		},
		{
			name:        "too many items",
			schema:      searchSchema,
			give:        `{"queries": ["a", "b", "c", "d", "e", "f"]}`,
			wantArgs:    `{"queries": ["a", "b", "c", "d", "e", "f"]}`,
			wantRepairs: []string{},
			wantErr:     `argument "queries": takes at most 5 items, got 6`,
		},
		{
			name:        "below minimum and not in enum, in path order",
			schema:      searchSchema,
			give:        `{"queries": ["a"], "limit": 0, "match": "fuzy"}`,
			wantArgs:    `{"queries": ["a"], "limit": 0, "match": "fuzy"}`,
			wantRepairs: []string{},
			wantErr:     `argument "limit": must be at least 1, got 0; argument "match": must be one of "exact", "fuzzy", got "fuzy"`,
		},
		{
			name:        "nested missing and wrong type",
			schema:      writeSchema,
			give:        `{"files": [{"path": "a"}, {"path": 3, "content": "x"}]}`,
			wantArgs:    `{"files": [{"path": "a"}, {"path": 3, "content": "x"}]}`,
			wantRepairs: []string{},
			wantErr:     `missing required argument "files[0].content"; argument "files[1].path": expected a string, got a number`,
		},
		{
			name:        "a sibling's repair stands while the rest is refused",
			schema:      searchSchema,
			give:        `{"queries": "a", "limit": "ten"}`,
			wantArgs:    `{"limit":"ten","queries":["a"]}`,
			wantRepairs: []string{"2 queries"},
			wantErr:     `argument "limit": expected an integer, got a string`,
		},
		{
			name:        "rule 3 twin: two lists could take the element",
			schema:      twoListsSchema,
			give:        `{"path": "a", "content": "b"}`,
			wantArgs:    `{"path": "a", "content": "b"}`,
			wantRepairs: []string{},
			wantErr:     `unknown arguments "content", "path" (known: "files", "links")`,
		},
		{
			name:        "rule 2 and rule 3 both fit a union: neither fires",
			schema:      unionSchema,
			give:        `{"item": {"path": "a"}}`,
			wantArgs:    `{"item": {"path": "a"}}`,
			wantRepairs: []string{},
			wantErr:     `missing required argument "item.list"; unknown argument "item.path" (known: "list")`,
		},
		{
			name:        "union of types",
			schema:      unionSchema,
			give:        `{"n": true}`,
			wantArgs:    `{"n": true}`,
			wantRepairs: []string{},
			wantErr:     `argument "n": expected a string or an integer, got a boolean`,
		},
		{
			name:        "union explains the branch that came closest",
			schema:      unionSchema,
			give:        `{"ids": [1, "two"]}`,
			wantArgs:    `{"ids": [1, "two"]}`,
			wantRepairs: []string{},
			wantErr:     `argument "ids[1]": expected an integer, got a string`,
		},
		{
			name:        "not an object",
			schema:      searchSchema,
			give:        `["a"]`,
			wantArgs:    `["a"]`,
			wantRepairs: []string{},
			wantErr:     `arguments must be a JSON object, got an array`,
		},
		{
			name:        "a string that is not an object's text",
			schema:      searchSchema,
			give:        `"find a"`,
			wantArgs:    `"find a"`,
			wantRepairs: []string{},
			wantErr:     `arguments must be a JSON object, got a string`,
		},
		{
			name:        "cut off",
			schema:      searchSchema,
			give:        `{"queries": ["a", "b`,
			wantArgs:    `{"queries": ["a", "b`,
			wantRepairs: []string{},
			wantErr:     `arguments are not valid JSON: the text ends early`,
		},
		{
			name:        "bad JSON says where",
			schema:      searchSchema,
			give:        `{"quéries": x}`,
			wantArgs:    `{"quéries": x}`,
			wantRepairs: []string{},
			wantErr:     `arguments are not valid JSON at character 14: invalid character 'x' looking for beginning of value`,
		},
		{
			name:        "trailing text",
			schema:      searchSchema,
			give:        `{"queries": ["a"]} {}`,
			wantArgs:    `{"queries": ["a"]} {}`,
			wantRepairs: []string{},
			wantErr:     `arguments are not valid JSON at character 20: unexpected text after the JSON value`,
		},
		{
			name:        "white space JSON does not know",
			schema:      noArgsSchema,
			give:        "{}\v",
			wantArgs:    "{}\v",
			wantRepairs: []string{},
			wantErr:     `arguments are not valid JSON at character 3: unexpected text after the JSON value`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tool := compile(t, tt.schema)

			got, repairs, err := tool.Fix(json.RawMessage(tt.give))
			var argErr *repair.ArgumentError
			require.ErrorAs(t, err, &argErr)
			require.Equal(t, "tool", argErr.Tool)
			require.Equal(t, tt.wantErr, err.Error())
			require.Equal(t, tt.wantArgs, string(got))
			require.Equal(t, tt.wantRepairs, brief(repairs))
		})
	}
}

func TestFixKeepsBytesWhenNothingIsRepaired(t *testing.T) {
	t.Parallel()
	tool := compile(t, searchSchema)
	give := json.RawMessage("{ \"queries\" : [\"<a> & b\"],\n \"limit\": 1.0e1 }")

	got, repairs, err := tool.Fix(give)
	require.NoError(t, err)
	require.Empty(t, repairs)
	require.Equal(t, string(give), string(got))
}

func TestFixWritesRepairedArgumentsPlainly(t *testing.T) {
	t.Parallel()
	tool := compile(t, draft7Schema)

	got, repairs, err := tool.Fix(json.RawMessage(`{"names": "x", "code": "if a < b && c > d {}", "extra": 12345678901234567890}`))
	require.NoError(t, err)
	require.Equal(t, []repair.Repair{{Rule: repair.RuleListFromElement, Path: "names", Note: "read a single value as a one-element list"}}, repairs)
	// No HTML escaping, and numbers kept as written, not rounded through float64.
	require.Equal(t, `{"code":"if a < b && c > d {}","extra":12345678901234567890,"names":["x"]}`, string(got))
}

func TestFixRecordsWhatWasFolded(t *testing.T) {
	t.Parallel()
	tool := compile(t, writeSchema)

	_, repairs, err := tool.Fix(json.RawMessage(`{"path": "a", "content": "b"}`))
	require.NoError(t, err)
	require.Equal(t, []repair.Repair{{Rule: repair.RuleFoldIntoList, Path: "files", Note: `folded "content", "path" into a one-element list`}}, repairs)
	require.Equal(t, "fold-into-list", repairs[0].Rule.String())
}

func TestFixCapsProblems(t *testing.T) {
	t.Parallel()
	tool := compile(t, searchSchema)

	_, _, err := tool.Fix(json.RawMessage(`{"a": 1, "queries": [1, 2, 3, 4, 5], "limit": -1}`))
	require.EqualError(t, err, `unknown argument "a" (known: "limit", "match", "queries"); `+
		`argument "limit": must be at least 1, got -1; `+
		`argument "queries[0]": expected a string, got a number; `+
		`argument "queries[1]": expected a string, got a number; `+
		`argument "queries[2]": expected a string, got a number; and 2 more`)
}

func TestCompileRefusesBadSchemas(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		give string
		want string
	}{
		{name: "not JSON", give: `{"type":`, want: `compile schema of "tool": `},
		{name: "not a schema", give: `{"type": "list"}`, want: `compile schema of "tool": `},
		{name: "remote reference", give: `{"$ref": "https://example.com/schema.json"}`, want: `compile schema of "tool": `},
		{name: "file reference", give: `{"$ref": "file:///etc/hostname"}`, want: `compile schema of "tool": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := repair.Compile("tool", json.RawMessage(tt.give))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestToolIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	tool := compile(t, writeSchema)
	require.Equal(t, "tool", tool.Name())

	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			got, _, err := tool.Fix(json.RawMessage(`{"path": "a", "content": "b", "tags": "x"}`))
			require.NoError(t, err)
			require.JSONEq(t, `{"files": [{"path": "a", "content": "b", "tags": ["x"]}]}`, string(got))
		})
	}
}

func BenchmarkFix(b *testing.B) {
	tool, err := repair.Compile("write_file", json.RawMessage(writeSchema))
	require.NoError(b, err)
	benchmarks := []struct {
		name string
		give json.RawMessage
	}{
		{name: "valid", give: json.RawMessage(`{"files": [{"path": "notes/summary.md", "content": "# Summary\n\nThree findings, each with its source.", "tags": ["report"]}]}`)},
		{name: "repaired", give: json.RawMessage(`{"path": "notes/summary.md", "content": "# Summary\n\nThree findings, each with its source.", "tags": "report"}`)},
		{name: "refused", give: json.RawMessage(`{"files": [{"path": "notes/summary.md", "body": "# Summary"}]}`)},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = tool.Fix(bm.give)
			}
		})
	}
}
