// Package repair mends the shape of a model's tool-call arguments from the
// tool's own JSON Schema, then validates them, so that a call either fits its
// schema or is refused with words the model can act on. No rule names a tool:
// every decision is read from the schema.
package repair

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Rule names a repair. Rules 1 to 3 are the product's numbered rules; the
// others mend the envelope of the arguments before those rules run.
type Rule int

// The repairs Fix makes.
const (
	// RuleListFromText reads a list sent as the JSON text of a list as that
	// list: "[\"a\",\"b\"]" becomes ["a","b"].
	RuleListFromText Rule = 1
	// RuleListFromElement reads a single value sent where a list is expected
	// as a one-element list: "a" becomes ["a"].
	RuleListFromElement Rule = 2
	// RuleFoldIntoList folds the fields of a one-element list of objects,
	// flattened into the object that holds the list, back into that list.
	RuleFoldIntoList Rule = 3
	// RuleEmptyArguments reads empty or null arguments as {}.
	RuleEmptyArguments Rule = 4
	// RuleArgumentsFromText reads arguments sent as the JSON text of an
	// object (encoded twice) as that object.
	RuleArgumentsFromText Rule = 5
)

// String returns the rule's short name, as recorded and logged.
func (r Rule) String() string {
	switch r {
	case RuleListFromText:
		return "list-from-text"
	case RuleListFromElement:
		return "list-from-element"
	case RuleFoldIntoList:
		return "fold-into-list"
	case RuleEmptyArguments:
		return "empty-arguments"
	case RuleArgumentsFromText:
		return "arguments-from-text"
	}
	return fmt.Sprintf("rule-%d", int(r))
}

// Repair records one change Fix made to a call's arguments.
type Repair struct {
	// Rule is the rule that fired.
	Rule Rule `json:"rule"`
	// Path is where it fired, e.g. "queries" or "files[0].tags"; empty for
	// the arguments as a whole.
	Path string `json:"path"`
	// Note says what was done, in words.
	Note string `json:"note"`
}

// ArgumentError refuses a call whose arguments do not fit the tool's schema,
// even after repair. Its message is meant for the model.
type ArgumentError struct {
	// Tool is the tool the call was for.
	Tool string
	// Problems are short sentences, one per thing wrong, in a stable order.
	Problems []string
	// Split, when set, says every problem lies inside items of the tool's
	// item list, and what the call is without them: a caller may run the
	// other items and report these as failed one by one.
	Split *Split
}

// Error joins the problems; it does not repeat the tool name, which the
// caller already shows beside it.
func (e *ArgumentError) Error() string {
	return strings.Join(e.Problems, "; ")
}

// Tool is a tool's argument schema, compiled once and used for every call.
// It is safe for concurrent use.
type Tool struct {
	name   string
	schema *jsonschema.Schema
	// byLocation finds a subschema from the location a validation error
	// names, to describe what was expected there.
	byLocation map[string]*jsonschema.Schema
	// list is ItemList.
	list string
}

// schemaURL is where the compiler files the schema; it only appears in
// locations inside validation errors, never in messages.
const schemaURL = "urn:toolgate:arguments"

// budget bounds the work one Fix may spend looking for a reading, so a
// pathological call costs little; past it the arguments go on as they are.
const budget = 1000

// Compile compiles a tool's argument schema (JSON Schema, draft 2020-12
// unless the schema names another draft). An empty schema accepts any object.
func Compile(name string, schema json.RawMessage) (*Tool, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("compile schema of %q: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// A tool's schema is self-contained: a $ref to a file or a URL is refused
	// rather than fetched.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("compile schema of %q: %w", name, err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile schema of %q: %w", name, err)
	}
	t := &Tool{name: name, schema: s, byLocation: map[string]*jsonschema.Schema{}, list: itemList(s)}
	index(s, t.byLocation)
	return t, nil
}

// Name is the tool's name, as given to Compile.
func (t *Tool) Name() string {
	return t.name
}

// Fix repairs the shape of a call's arguments where the schema leaves one
// reading, then validates them. With no error, fixed is what to send: the
// arguments as sent, byte for byte, when no repair fired. A call that still
// does not fit returns an *ArgumentError, together with the arguments as
// repaired so far and the repairs, for the record; such a call is not sent,
// unless its faults all lie inside items of the item list
// (ArgumentError.Split): then the other items may be.
func (t *Tool) Fix(args json.RawMessage) (fixed json.RawMessage, repairs []Repair, err error) {
	v, repairs, err := t.envelope(args)
	if err != nil {
		return args, repairs, err
	}
	if t.schema.Validate(v) != nil {
		f := fixer{budget: budget}
		var more []Repair
		v, more = f.fix(conj{t.schema}, v, "", false)
		repairs = append(repairs, more...)
	}
	fixed = args
	if len(repairs) > 0 {
		slices.SortStableFunc(repairs, func(a, b Repair) int {
			return strings.Compare(a.Path, b.Path)
		})
		if fixed, err = encode(v); err != nil {
			return args, repairs, fmt.Errorf("encode arguments: %w", err)
		}
	}
	if verr := t.schema.Validate(v); verr != nil {
		return fixed, repairs, &ArgumentError{Tool: t.name, Problems: t.problems(v, verr), Split: t.split(v, verr)}
	}
	return fixed, repairs, nil
}

// maxUnwrap bounds how many times arguments encoded as JSON text are
// decoded again; one is usual, two has been seen.
const maxUnwrap = 3

// envelope decodes the arguments as a whole, mending empty and doubly
// encoded arguments, and refuses anything that is not an object.
func (t *Tool) envelope(args json.RawMessage) (any, []Repair, error) {
	trimmed := trimJSONSpace(args)
	if len(trimmed) == 0 {
		return map[string]any{}, []Repair{{Rule: RuleEmptyArguments, Note: "no arguments were sent; read as {}"}}, nil
	}
	v, err := decode(trimmed)
	if err != nil {
		return nil, nil, t.refuse(jsonProblem(trimmed, err))
	}
	var repairs []Repair
	for range maxUnwrap {
		s, ok := v.(string)
		if !ok {
			break
		}
		text := strings.TrimSpace(s)
		if text == "" {
			v = nil
			break
		}
		inner, err := decode([]byte(text))
		if err != nil {
			break
		}
		if _, isObject := inner.(map[string]any); !isObject {
			if _, isText := inner.(string); !isText {
				break
			}
		}
		v = inner
		repairs = append(repairs, Repair{Rule: RuleArgumentsFromText, Note: "the arguments were sent as the JSON text of an object; read as that object"})
	}
	switch v.(type) {
	case map[string]any:
		return v, repairs, nil
	case nil:
		return map[string]any{}, append(repairs, Repair{Rule: RuleEmptyArguments, Note: "empty or null arguments; read as {}"}), nil
	}
	return nil, repairs, t.refuse(fmt.Sprintf("arguments must be a JSON object, got %s", typeArticle(jsonType(v))))
}

func (t *Tool) refuse(problem string) *ArgumentError {
	return &ArgumentError{Tool: t.name, Problems: []string{problem}}
}

// jsonProblem says where JSON text went wrong, in characters rather than
// bytes, and says so plainly when the text stops early: the usual cause is
// a model cut off mid-call.
func jsonProblem(text []byte, err error) string {
	var syntax *json.SyntaxError
	var trailing *trailingError
	switch {
	case errors.As(err, &trailing):
		return fmt.Sprintf("arguments are not valid JSON at character %d: %s", utf8.RuneCount(text[:trailing.offset])+1, trailing.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "arguments are not valid JSON: the text ends early"
	case errors.As(err, &syntax):
		// Offset counts the bytes before the one that broke the text.
		at := min(max(int(syntax.Offset), 0), len(text))
		return fmt.Sprintf("arguments are not valid JSON at character %d: %s", utf8.RuneCount(text[:at])+1, syntax.Error())
	}
	return fmt.Sprintf("arguments are not valid JSON: %s", err.Error())
}

// trimJSONSpace trims only what JSON counts as white space; trimming more
// would pass on text that is not JSON.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// decode reads exactly one JSON value, keeping numbers as written.
func decode(text []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	end := int(dec.InputOffset())
	if rest := bytes.TrimLeft(text[end:], " \t\r\n"); len(rest) > 0 {
		return nil, &trailingError{offset: len(text) - len(rest)}
	}
	return v, nil
}

// trailingError reports text after the one JSON value.
type trailingError struct {
	offset int
}

func (e *trailingError) Error() string {
	return "unexpected text after the JSON value"
}

// encode writes repaired arguments without HTML escaping, so code and
// markup in arguments reach the tool as the model wrote them.
func encode(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// index files every subschema under its location.
func index(s *jsonschema.Schema, m map[string]*jsonschema.Schema) {
	if s == nil {
		return
	}
	if _, seen := m[s.Location]; seen {
		return
	}
	m[s.Location] = s
	var subs []*jsonschema.Schema
	subs = append(subs, s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
		s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema)
	if s.DynamicRef != nil {
		subs = append(subs, s.DynamicRef.Ref)
	}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	subs = append(subs, s.PrefixItems...)
	for _, p := range s.Properties {
		subs = append(subs, p)
	}
	for _, p := range s.PatternProperties {
		subs = append(subs, p)
	}
	for _, p := range s.DependentSchemas {
		subs = append(subs, p)
	}
	for _, d := range s.Dependencies {
		if p, ok := d.(*jsonschema.Schema); ok {
			subs = append(subs, p)
		}
	}
	for _, x := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch x := x.(type) {
		case *jsonschema.Schema:
			subs = append(subs, x)
		case []*jsonschema.Schema:
			subs = append(subs, x...)
		}
	}
	for _, sub := range subs {
		index(sub, m)
	}
}
