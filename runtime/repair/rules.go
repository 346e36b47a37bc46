package repair

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// conj is a set of schemas that all apply to one value.
type conj []*jsonschema.Schema

// reading is one way to read a value, with the repairs it takes.
type reading struct {
	v       any
	repairs []Repair
}

// fixer walks a value and its schema together, looking for the one reading
// that fits where the value as sent does not.
type fixer struct {
	budget int
	depth  int
}

// maxDepth is how deep into the arguments repairs look. Tool arguments a
// model writes are shallow; a deeper value is validated but not reshaped,
// which bounds what a pathological call can cost.
const maxDepth = 24

// fix returns v as it should be read under the schemas c. The value as
// sent, with its parts repaired, comes first: a reshaping at this level is
// considered only when that fails, and taken only when exactly one fits.
// fresh marks a value a rule has just moved, which is not reshaped again.
func (f *fixer) fix(c conj, v any, path string, fresh bool) (any, []Repair) {
	if len(c) == 0 || f.budget <= 0 || f.depth >= maxDepth {
		return v, nil
	}
	f.budget--
	f.depth++
	defer func() { f.depth-- }()
	if valid(c, v) {
		return v, nil
	}
	branches, ok := expand(c)
	if !ok {
		return v, nil
	}
	var asSent, reshaped []reading
	var best reading
	for _, b := range branches {
		r := f.children(b, v, path)
		if valid(c, r.v) {
			asSent = addDistinct(asSent, r)
			continue
		}
		best = r
		if fresh {
			continue
		}
		for _, r := range f.reshape(b, v, path) {
			if valid(c, r.v) {
				reshaped = addDistinct(reshaped, r)
			}
		}
	}
	switch {
	case len(asSent) == 1:
		return asSent[0].v, asSent[0].repairs
	case len(asSent) == 0 && len(reshaped) == 1:
		return reshaped[0].v, reshaped[0].repairs
	case len(asSent) == 0 && len(reshaped) == 0 && len(branches) == 1:
		// Nothing fits; keep the repairs below this level so the refusal
		// names only what is still wrong.
		return best.v, best.repairs
	}
	return v, nil
}

// children repairs the members of an object or the items of a list, keeping
// its shape.
func (f *fixer) children(c conj, v any, path string) reading {
	switch v := v.(type) {
	case map[string]any:
		var out map[string]any
		var repairs []Repair
		for _, k := range sortedKeys(v) {
			nv, r := f.fix(childConj(c, k), v[k], joinKey(path, k), false)
			if len(r) == 0 {
				continue
			}
			if out == nil {
				out = make(map[string]any, len(v))
				for k, x := range v {
					out[k] = x
				}
			}
			out[k] = nv
			repairs = append(repairs, r...)
		}
		if out == nil {
			return reading{v: v}
		}
		return reading{v: out, repairs: repairs}
	case []any:
		var out []any
		var repairs []Repair
		for i, x := range v {
			nv, r := f.fix(itemConj(c, i), x, joinIndex(path, i), false)
			if len(r) == 0 {
				continue
			}
			if out == nil {
				out = slices.Clone(v)
			}
			out[i] = nv
			repairs = append(repairs, r...)
		}
		if out == nil {
			return reading{v: v}
		}
		return reading{v: out, repairs: repairs}
	}
	return reading{v: v}
}

// reshape lists the readings the three rules offer for v under one branch
// of its schema. The caller keeps those that validate.
func (f *fixer) reshape(c conj, v any, path string) []reading {
	var out []reading
	if explicitly(c, "array") {
		list, isListText := listText(v)
		if isListText {
			// Rule 1. Such a string is never read as a one-element list of
			// itself: nobody means a list holding the text of a list.
			r := f.children(c, list, path)
			out = append(out, reading{
				v:       r.v,
				repairs: prepend(Repair{Rule: RuleListFromText, Path: path, Note: "read the JSON text of a list as that list"}, r.repairs),
			})
		}
		if _, isList := v.([]any); !isList && v != nil && !isListText {
			// Rule 2. Null is left alone: it more likely means "none" than
			// a list holding null.
			ev, er := f.fix(itemConj(c, 0), v, joinIndex(path, 0), true)
			out = append(out, reading{
				v:       []any{ev},
				repairs: prepend(Repair{Rule: RuleListFromElement, Path: path, Note: "read a single value as a one-element list"}, er),
			})
		}
	}
	if obj, ok := v.(map[string]any); ok && explicitly(c, "object") {
		out = append(out, f.fold(c, obj, path)...)
	}
	return out
}

// fold offers rule 3: the members of obj that the schema does not declare
// become the one element of a declared list of objects that obj lacks.
func (f *fixer) fold(c conj, obj map[string]any, path string) []reading {
	var declared, loose []string
	for _, k := range sortedKeys(obj) {
		if isDeclared(c, k) {
			declared = append(declared, k)
		} else {
			loose = append(loose, k)
		}
	}
	if len(loose) == 0 {
		return nil
	}
	var out []reading
	for _, p := range declaredNames(c) {
		if _, has := obj[p]; has {
			continue
		}
		ic, ok := listOfObjects(childConj(c, p))
		if !ok {
			continue
		}
		elem := make(map[string]any, len(loose))
		for _, k := range loose {
			elem[k] = obj[k]
		}
		ev, repairs := f.fix(ic, elem, joinIndex(joinKey(path, p), 0), true)
		repairs = prepend(Repair{
			Rule: RuleFoldIntoList,
			Path: joinKey(path, p),
			Note: "folded " + quoteList(loose) + " into a one-element list",
		}, repairs)
		next := make(map[string]any, len(declared)+1)
		for _, k := range declared {
			nv, r := f.fix(childConj(c, k), obj[k], joinKey(path, k), false)
			next[k] = nv
			repairs = append(repairs, r...)
		}
		next[p] = []any{ev}
		out = append(out, reading{v: next, repairs: repairs})
	}
	return out
}

// listOfObjects reports whether some branch of c is a list whose items are
// objects, and returns what applies to its first item.
func listOfObjects(c conj) (conj, bool) {
	lists, ok := expand(c)
	if !ok {
		return nil, false
	}
	for _, l := range lists {
		if !explicitly(l, "array") {
			continue
		}
		ic := itemConj(l, 0)
		items, ok := expand(ic)
		if !ok {
			continue
		}
		for _, item := range items {
			if explicitly(item, "object") {
				return ic, true
			}
		}
	}
	return nil, false
}

// maxBranches bounds the combinations of anyOf/oneOf choices considered at
// one value; a schema with more is left to validation alone.
const maxBranches = 16

// pending is a schema still to add to a branch, or a choice to make.
type pending struct {
	s    *jsonschema.Schema
	alts []*jsonschema.Schema
}

// expand follows $ref and allOf, and splits on every anyOf and oneOf, into
// the branches of c: each a set of schemas with no choice left to make.
func expand(c conj) ([]conj, bool) {
	todo := make([]pending, len(c))
	for i, s := range c {
		todo[i] = pending{s: s}
	}
	var out []conj
	ok := expandInto(nil, todo, &out)
	return out, ok
}

func expandInto(acc conj, todo []pending, out *[]conj) bool {
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		if p.alts != nil {
			for _, alt := range p.alts {
				next := append([]pending{{s: alt}}, todo...)
				if !expandInto(slices.Clone(acc), next, out) {
					return false
				}
			}
			return true
		}
		s := p.s
		if s == nil || slices.Contains(acc, s) {
			continue
		}
		acc = append(acc, s)
		for _, ref := range []*jsonschema.Schema{s.Ref, s.RecursiveRef} {
			if ref != nil {
				todo = append(todo, pending{s: ref})
			}
		}
		if s.DynamicRef != nil && s.DynamicRef.Ref != nil {
			todo = append(todo, pending{s: s.DynamicRef.Ref})
		}
		for _, a := range s.AllOf {
			todo = append(todo, pending{s: a})
		}
		if len(s.AnyOf) > 0 {
			todo = append(todo, pending{alts: s.AnyOf})
		}
		if len(s.OneOf) > 0 {
			todo = append(todo, pending{alts: s.OneOf})
		}
	}
	if len(*out) >= maxBranches {
		return false
	}
	*out = append(*out, acc)
	return true
}

// valid reports whether v fits every schema of c.
func valid(c conj, v any) bool {
	for _, s := range c {
		if s.Validate(v) != nil {
			return false
		}
	}
	return true
}

// explicitly reports whether c names type t and every type keyword in c
// allows it. A schema silent on type offers no reading to reshape into.
func explicitly(c conj, t string) bool {
	named := false
	for _, s := range c {
		if s.Types == nil || s.Types.IsEmpty() {
			continue
		}
		if !slices.Contains(s.Types.ToStrings(), t) {
			return false
		}
		named = true
	}
	return named
}

// childConj is what applies to member key of an object under c.
func childConj(c conj, key string) conj {
	var out conj
	for _, s := range c {
		matched := false
		if p, ok := s.Properties[key]; ok {
			out = append(out, p)
			matched = true
		}
		for re, p := range s.PatternProperties {
			if re.MatchString(key) {
				out = append(out, p)
				matched = true
			}
		}
		if ap, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && !matched {
			out = append(out, ap)
		}
	}
	return out
}

// itemConj is what applies to item i of a list under c.
func itemConj(c conj, i int) conj {
	var out conj
	for _, s := range c {
		switch {
		case i < len(s.PrefixItems):
			out = append(out, s.PrefixItems[i])
		case s.Items2020 != nil:
			out = append(out, s.Items2020)
		}
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			out = append(out, items)
		case []*jsonschema.Schema:
			if i < len(items) {
				out = append(out, items[i])
			} else if ai, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
				out = append(out, ai)
			}
		}
	}
	return out
}

// isDeclared reports whether c names member key, by name or pattern.
func isDeclared(c conj, key string) bool {
	for _, s := range c {
		if _, ok := s.Properties[key]; ok {
			return true
		}
		for re := range s.PatternProperties {
			if re.MatchString(key) {
				return true
			}
		}
	}
	return false
}

// declaredNames lists the members c names, sorted.
func declaredNames(c conj) []string {
	var out []string
	for _, s := range c {
		for k := range s.Properties {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// listText reads v as the JSON text of a list, if it is one.
func listText(v any) ([]any, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, false
	}
	text := trimJSONSpace([]byte(s))
	if len(text) < 2 || text[0] != '[' || text[len(text)-1] != ']' {
		return nil, false
	}
	parsed, err := decode(text)
	if err != nil {
		return nil, false
	}
	list, ok := parsed.([]any)
	return list, ok
}

// addDistinct adds r unless a reading with the same value is there: two
// routes to one value are one reading.
func addDistinct(rs []reading, r reading) []reading {
	for _, x := range rs {
		if reflect.DeepEqual(x.v, r.v) {
			return rs
		}
	}
	return append(rs, r)
}

func prepend(r Repair, rs []Repair) []Repair {
	return append([]Repair{r}, rs...)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// joinKey extends a path with an object member: files[0].path, or
// files[0]["odd key"] where a bare name would mislead.
func joinKey(path, key string) string {
	if !isName(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func isName(key string) bool {
	if key == "" || (key[0] >= '0' && key[0] <= '9') {
		return false
	}
	for _, r := range key {
		ok := r == '_' || r == '$' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

func quoteList(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ", ")
}
