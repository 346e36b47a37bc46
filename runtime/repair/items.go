package repair

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Split is a call whose every fault lies inside items of the tool's item
// list (Tool.ItemList): without those items, the call fits the schema. A
// fault in the shape of the call itself (an unknown argument, too many
// items, a required argument missing) never splits it.
type Split struct {
	// List is the item list's argument, e.g. "facts".
	List string
	// Faults are the items that do not fit, by their index in the list as
	// sent (after repair), in order.
	Faults []ItemFault
	// Kept are the indices, in the list as sent, of the items Rest keeps,
	// in order: item j of Rest's list is item Kept[j] of the call's.
	Kept []int
	// Rest is the arguments without the faulted items. It fits the schema
	// and keeps at least one item.
	Rest json.RawMessage
}

// ItemFault is one item of the item list that does not fit.
type ItemFault struct {
	// Index is the item's position in the list as sent.
	Index int
	// Item is the item as sent (after repair).
	Item json.RawMessage
	// Problems say what is wrong with it, each naming its path
	// (facts[1].text), as ArgumentError.Problems do.
	Problems []string
}

// ItemList is the argument holding the call's items, or "" when the schema
// names none: the one array among the top-level arguments, and a required
// one, so that a call is about its items. A schema with two lists, or a
// list the call may leave out, leaves no one reading, and has none.
func (t *Tool) ItemList() string { return t.list }

// itemList finds Tool.ItemList in the schema.
func itemList(root *jsonschema.Schema) string {
	branches, ok := expand(conj{root})
	if !ok || len(branches) != 1 || !explicitly(branches[0], "object") {
		return ""
	}
	b := branches[0]
	found := ""
	for _, name := range declaredNames(b) {
		if pc, ok := expand(childConj(b, name)); !ok || len(pc) != 1 || !explicitly(pc[0], "array") {
			continue
		}
		if found != "" {
			return ""
		}
		found = name
	}
	for _, s := range b {
		if slices.Contains(s.Required, found) {
			return found
		}
	}
	return ""
}

// split returns the call v, which failed validation with err, as a Split
// when every failed keyword lies inside an item of the item list, and
// dropping those items leaves a call that fits with an item to run; nil
// otherwise.
func (t *Tool) split(v any, err error) *Split {
	var verr *jsonschema.ValidationError
	if t.list == "" || !errors.As(err, &verr) {
		return nil
	}
	obj, _ := v.(map[string]any)
	list, ok := obj[t.list].([]any)
	if !ok {
		return nil
	}
	var leaves []*jsonschema.ValidationError
	flatten(verr, &leaves)
	bad := map[int]bool{}
	for _, l := range leaves {
		loc := l.InstanceLocation
		if len(loc) < 2 || loc[0] != t.list {
			return nil
		}
		i, err := strconv.Atoi(loc[1])
		if err != nil || i < 0 || i >= len(list) {
			return nil
		}
		bad[i] = true
	}
	if len(bad) == 0 || len(bad) == len(list) {
		return nil
	}
	s := &Split{List: t.list}
	rest := make([]any, 0, len(list)-len(bad))
	for i, item := range list {
		if !bad[i] {
			rest = append(rest, item)
			s.Kept = append(s.Kept, i)
		}
	}
	next := maps.Clone(obj)
	next[t.list] = rest
	if t.schema.Validate(next) != nil {
		// Fewer items than the list needs, say: the call as a whole does
		// not fit.
		return nil
	}
	if s.Rest, err = encode(next); err != nil {
		return nil
	}
	ps := t.collect(v, verr)
	for i := range list {
		if !bad[i] {
			continue
		}
		raw, err := encode(list[i])
		if err != nil {
			return nil
		}
		at := joinIndex(joinKey("", t.list), i)
		words := sentences(slices.DeleteFunc(slices.Clone(ps), func(p problem) bool { return !within(p.path, at) }))
		s.Faults = append(s.Faults, ItemFault{Index: i, Item: raw, Problems: words})
	}
	return s
}

// within reports whether path is at or below prefix: facts[1].text is
// within facts[1], facts[10] is not.
func within(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	rest := path[len(prefix):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}
