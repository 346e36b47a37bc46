package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// maxProblems bounds a refusal: a model fixes the first few and tries again.
const maxProblems = 5

// maxKnown bounds the list of known argument names quoted with an unknown one.
const maxKnown = 12

var printer = message.NewPrinter(language.English)

// problem is one thing wrong, filed under where it is.
type problem struct {
	path string
	text string
}

// problems turns the library's error tree into short sentences: one per
// failed keyword, the best-matching alternative for a failed anyOf/oneOf.
func (t *Tool) problems(v any, err error) []string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []string{err.Error()}
	}
	return sentences(t.collect(v, verr))
}

// sentences sorts problems by where they are and words each once, at most
// maxProblems of them.
func sentences(ps []problem) []string {
	slices.SortFunc(ps, func(a, b problem) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return strings.Compare(a.text, b.text)
	})
	var out []string
	for _, p := range ps {
		if !slices.Contains(out, p.text) {
			out = append(out, p.text)
		}
	}
	if len(out) == 0 {
		out = []string{"arguments do not fit the tool's schema"}
	}
	if len(out) > maxProblems {
		more := len(out) - maxProblems
		out = append(out[:maxProblems], fmt.Sprintf("and %d more", more))
	}
	return out
}

func (t *Tool) collect(v any, e *jsonschema.ValidationError) []problem {
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		var out []problem
		for _, c := range e.Causes {
			out = append(out, t.collect(v, c)...)
		}
		return out
	case *kind.AnyOf:
		return t.union(v, e)
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			return t.union(v, e)
		}
		path := formatPath(v, e.InstanceLocation)
		return []problem{{path, subject(path) + " fits more than one of the allowed forms; make it fit exactly one"}}
	}
	return []problem{t.leaf(v, e)}
}

// branch is how one alternative of a failed anyOf/oneOf failed.
type branch struct {
	problems []problem
	// typeOnly: it failed on the value's type alone, at the union's own place.
	typeOnly bool
	wants    []string
	depth    int
}

// union explains a value that fits none of the alternatives. When each
// alternative only wanted another type, it names them all; otherwise it
// explains the alternative that came closest: one whose type fitted and
// whose failure lies deepest in the value.
func (t *Tool) union(v any, e *jsonschema.ValidationError) []problem {
	path := formatPath(v, e.InstanceLocation)
	var bs []branch
	allTypes := true
	for _, c := range e.Causes {
		b := branch{problems: t.collect(v, c)}
		var leaves []*jsonschema.ValidationError
		flatten(c, &leaves)
		b.typeOnly = len(leaves) > 0
		for _, l := range leaves {
			b.depth = max(b.depth, len(l.InstanceLocation))
			k, isType := l.ErrorKind.(*kind.Type)
			if !isType || len(l.InstanceLocation) != len(e.InstanceLocation) {
				b.typeOnly = false
				continue
			}
			b.wants = append(b.wants, t.wantWords(l.SchemaURL, k.Want)...)
		}
		allTypes = allTypes && b.typeOnly
		bs = append(bs, b)
	}
	if len(bs) == 0 {
		return []problem{{path, subject(path) + " does not fit any of the allowed forms"}}
	}
	if allTypes {
		var wants []string
		for _, b := range bs {
			for _, w := range b.wants {
				if !slices.Contains(wants, w) {
					wants = append(wants, w)
				}
			}
		}
		return []problem{{path, fmt.Sprintf("%s: expected %s, got %s", subject(path), strings.Join(wants, " or "), typeArticle(jsonType(at(v, e.InstanceLocation))))}}
	}
	best := slices.MinFunc(bs, func(a, b branch) int {
		switch {
		case a.typeOnly != b.typeOnly:
			if a.typeOnly {
				return 1
			}
			return -1
		case a.depth != b.depth:
			return b.depth - a.depth
		}
		return len(a.problems) - len(b.problems)
	})
	return best.problems
}

// flatten collects the errors that name a failed keyword, looking through
// the ones that only group others.
func flatten(e *jsonschema.ValidationError, out *[]*jsonschema.ValidationError) {
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference, *kind.AnyOf, *kind.OneOf:
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				flatten(c, out)
			}
			return
		}
	}
	*out = append(*out, e)
}

// leaf words one failed keyword.
func (t *Tool) leaf(v any, e *jsonschema.ValidationError) problem {
	path := formatPath(v, e.InstanceLocation)
	subj := subject(path)
	say := func(format string, args ...any) problem {
		return problem{path, subj + ": " + fmt.Sprintf(format, args...)}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return say("expected %s, got %s", strings.Join(t.wantWords(e.SchemaURL, k.Want), " or "), typeArticle(k.Got))
	case *kind.Required:
		return problem{path, missing(path, k.Missing)}
	case *kind.DependentRequired:
		return problem{path, missing(path, k.Missing) + fmt.Sprintf(", needed with %q", joinKey(path, k.Prop))}
	case *kind.Dependency:
		return problem{path, missing(path, k.Missing) + fmt.Sprintf(", needed with %q", joinKey(path, k.Prop))}
	case *kind.AdditionalProperties:
		return problem{path, t.unknown(path, e.SchemaURL, k.Properties)}
	case *kind.FalseSchema:
		if path == "" {
			return problem{path, "no arguments are accepted"}
		}
		return problem{path, subj + " is not accepted"}
	case *kind.Enum:
		if len(k.Want) == 1 {
			return say("must be %s, got %s", show(k.Want[0]), show(k.Got))
		}
		return say("must be one of %s, got %s", showList(k.Want), show(k.Got))
	case *kind.Const:
		return say("must be %s, got %s", show(k.Want), show(k.Got))
	case *kind.MinItems:
		return say("needs at least %d %s, got %d", k.Want, plural(k.Want, "item"), k.Got)
	case *kind.MaxItems:
		return say("takes at most %d %s, got %d", k.Want, plural(k.Want, "item"), k.Got)
	case *kind.MinLength:
		return say("needs at least %d %s, got %d", k.Want, plural(k.Want, "character"), k.Got)
	case *kind.MaxLength:
		return say("takes at most %d %s, got %d", k.Want, plural(k.Want, "character"), k.Got)
	case *kind.MinProperties:
		return say("needs at least %d %s, got %d", k.Want, plural(k.Want, "field"), k.Got)
	case *kind.MaxProperties:
		return say("takes at most %d %s, got %d", k.Want, plural(k.Want, "field"), k.Got)
	case *kind.Minimum:
		return say("must be at least %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.Maximum:
		return say("must be at most %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.ExclusiveMinimum:
		return say("must be greater than %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.ExclusiveMaximum:
		return say("must be less than %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.MultipleOf:
		return say("must be a multiple of %s, got %s", rat(k.Want), rat(k.Got))
	case *kind.Pattern:
		return say("must match the pattern %s, got %s", strconv.Quote(k.Want), show(k.Got))
	case *kind.Format:
		return say("is not a valid %s", k.Want)
	case *kind.UniqueItems:
		return say("items %d and %d are the same; list each once", k.Duplicates[0], k.Duplicates[1])
	case *kind.Not:
		return problem{path, subj + " is not accepted in this form"}
	}
	return say("%s", e.ErrorKind.LocalizedString(printer))
}

// missing words required members that are absent, by their full paths.
func missing(path string, names []string) string {
	full := make([]string, len(names))
	for i, n := range names {
		full[i] = joinKey(path, n)
	}
	if len(full) == 1 {
		return "missing required argument " + strconv.Quote(full[0])
	}
	return "missing required arguments " + quoteList(full)
}

// unknown words members the schema does not allow, and names the ones it
// knows, so the model can see what it meant.
func (t *Tool) unknown(path, location string, names []string) string {
	full := make([]string, len(names))
	for i, n := range names {
		full[i] = joinKey(path, n)
	}
	slices.Sort(full)
	text := "unknown argument " + quoteList(full)
	if len(full) > 1 {
		text = "unknown arguments " + quoteList(full)
	}
	s := t.byLocation[location]
	if s == nil || len(s.PatternProperties) > 0 || len(s.Properties) == 0 || len(s.Properties) > maxKnown {
		return text
	}
	known := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		known = append(known, k)
	}
	slices.Sort(known)
	return text + " (known: " + quoteList(known) + ")"
}

// wantWords words each wanted type, with the item type for lists where the
// schema at location names one.
func (t *Tool) wantWords(location string, want []string) []string {
	out := make([]string, 0, len(want))
	for _, w := range want {
		if w == "array" {
			if item := t.itemType(location); item != "" {
				out = append(out, "an array of "+item+"s")
				continue
			}
		}
		out = append(out, typeArticle(w))
	}
	return out
}

// itemType is the one type the items of the list at location must have, or "".
func (t *Tool) itemType(location string) string {
	s := t.byLocation[location]
	if s == nil {
		return ""
	}
	branches, ok := expand(itemConj(conj{s}, 0))
	if !ok || len(branches) != 1 {
		return ""
	}
	found := ""
	for _, s := range branches[0] {
		if s.Types == nil {
			continue
		}
		names := s.Types.ToStrings()
		if len(names) != 1 || (found != "" && found != names[0]) {
			return ""
		}
		found = names[0]
	}
	if found == "null" || found == "array" {
		return ""
	}
	return found
}

func subject(path string) string {
	if path == "" {
		return "arguments"
	}
	return "argument " + strconv.Quote(path)
}

// formatPath words a JSON pointer's tokens as a path, telling list indexes
// from member names by the value itself.
func formatPath(v any, tokens []string) string {
	path := ""
	cur := v
	for _, tok := range tokens {
		if list, ok := cur.([]any); ok {
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(list) {
				path = joinIndex(path, i)
				cur = list[i]
				continue
			}
		}
		path = joinKey(path, tok)
		obj, _ := cur.(map[string]any)
		cur = obj[tok]
	}
	return path
}

// at finds the value a pointer's tokens lead to.
func at(v any, tokens []string) any {
	for _, tok := range tokens {
		switch c := v.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		case map[string]any:
			v = c[tok]
		default:
			return nil
		}
	}
	return v
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

func typeArticle(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "object", "array":
		return "an " + t
	}
	return "a " + t
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// maxShown bounds a value quoted back to the model.
const maxShown = 40

func show(v any) string {
	switch v := v.(type) {
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case string:
		if r := []rune(v); len(r) > maxShown {
			v = string(r[:maxShown]) + "…"
		}
		return strconv.Quote(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func showList(vs []any) string {
	shown := make([]string, len(vs))
	for i, v := range vs {
		shown[i] = show(v)
	}
	return strings.Join(shown, ", ")
}

func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
