package dispatch

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/repair"
	"github.com/toolgate/toolgate/tools"
)

// maxItemInput bounds how much of a refused item is quoted back beside its
// failure: the model wrote it, and needs only to see which one it was.
const maxItemInput = 120

// mergeSplit makes the result of a call that ran without the items refused
// against the schema speak of the list the model sent: the resolver's item
// indices (and "list[i]" in its words) are mapped back through s.Kept, and
// each refused item is a REFUSED failure with its reasons, in item order.
// A JSON result's own "failures" field says the same.
func (res *Result) mergeSplit(s *repair.Split) {
	back := remapper(s)
	fs := make([]schematype.ItemFailure, 0, len(res.Failures)+len(s.Faults))
	for _, f := range res.Failures {
		if f.Item >= 0 && f.Item < len(s.Kept) {
			f.Item = s.Kept[f.Item]
		}
		f.Message = back(f.Message)
		fs = append(fs, f)
	}
	for _, f := range s.Faults {
		fs = append(fs, schematype.ItemFailure{Item: f.Index, Input: itemInput(f.Item), Kind: schematype.FailureRefused,
			Message: strings.Join(f.Problems, "; ")})
	}
	slices.SortStableFunc(fs, func(a, b schematype.ItemFailure) int { return a.Item - b.Item })
	res.Message = back(res.Message)
	res.Failures = fs
	if res.Kind == schematype.KindJSON {
		if content, ok := withFailures(res.Content, fs); ok {
			res.Content = content
		}
	}
}

// remapper returns what turns "list[j]" of the call as sent into
// "list[Kept[j]]" of the call as the model wrote it.
func remapper(s *repair.Split) func(string) string {
	boundary := ""
	if regexp.MustCompile(`^\w`).MatchString(s.List) {
		boundary = `\b`
	}
	re := regexp.MustCompile(boundary + regexp.QuoteMeta(s.List) + `\[(\d+)\]`)
	return func(msg string) string {
		if msg == "" {
			return msg
		}
		return re.ReplaceAllStringFunc(msg, func(m string) string {
			j, err := strconv.Atoi(m[len(s.List)+1 : len(m)-1])
			if err != nil || j < 0 || j >= len(s.Kept) {
				return m
			}
			return s.List + "[" + strconv.Itoa(s.Kept[j]) + "]"
		})
	}
}

// itemInput is a refused item as its failure quotes it: a string as it is,
// anything else as JSON, cut short.
func itemInput(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	return tools.Shorten(s, maxItemInput)
}

// withFailures replaces the "failures" field of a JSON object result,
// keeping its other members in their order; a result with no such field
// (an application's own JSON) is left as it is.
func withFailures(content []byte, fs []schematype.ItemFailure) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(content))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	encoded, err := marshal(fs)
	if err != nil {
		return nil, false
	}
	var b bytes.Buffer
	b.WriteByte('{')
	found := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		name, err := marshal(key)
		if err != nil {
			return nil, false
		}
		b.Write(name)
		b.WriteByte(':')
		if key == "failures" && !found {
			found = true
			value = encoded
		}
		b.Write(value)
	}
	b.WriteByte('}')
	return b.Bytes(), found
}

// marshal writes JSON without HTML escaping, as the resolvers do, so the
// rewritten result reads like the rest.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
