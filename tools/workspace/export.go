package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/tools"
)

// ExportContext selects a file's content from stored tool results, in
// place of content: the selections of Sources, joined in order, each
// starting on a new line.
type ExportContext struct {
	Sources []*Source `json:"sources"`
}

// Source selects text from one stored result: the whole result, or the
// value Field walks to, cut down to the region Between marks.
type Source struct {
	Ref string `json:"ref"`
	// Field walks the stored JSON: object keys, and list indexes from 0. A
	// JSON string met on the way is decoded and walked into. The value
	// reached is the selection: a string's decoded text, or any other
	// value's JSON as stored.
	Field []FieldStep `json:"field,omitempty"`
	// Between is [start, end]: the selection keeps only the text strictly
	// between the two delimiters, which must mark exactly one region. An
	// empty start is the beginning of the text, an empty end its end.
	Between []string `json:"between,omitempty"`
}

// FieldStep is one step of a Source's field: an object key, or a list
// index. It reads a string or an integer, so `["rows", 3]` works as the
// model writes it.
type FieldStep string

// UnmarshalGQL reads a step from a GraphQL value.
func (s *FieldStep) UnmarshalGQL(v any) error {
	switch x := v.(type) {
	case string:
		*s = FieldStep(x)
	case json.Number:
		*s = FieldStep(x.String())
	case int:
		*s = FieldStep(strconv.Itoa(x))
	case int64:
		*s = FieldStep(strconv.FormatInt(x, 10))
	case float64:
		*s = FieldStep(strconv.FormatFloat(x, 'f', -1, 64))
	default:
		return fmt.Errorf("field step must be a string or an integer, not %T", v)
	}
	return nil
}

// MarshalGQL writes the step as a string.
func (s FieldStep) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(s)))
}

// UnmarshalJSON reads a string or a number.
func (s *FieldStep) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("decode field step: %w", err)
	}
	return s.UnmarshalGQL(v)
}

// windowTools answer with windows of other results; exporting from them
// would copy a part where the whole is stored under the original ref.
var windowTools = []string{"read_tool_result"}

// Whole loads the stored result under ref, of this conversation, when its
// text is whole: a successful call's, not truncated at its source, not a
// read window, not media. Anything else is refused before it is used;
// verb says for what ("exported"). A ref of another conversation and a
// made-up one get the same words.
func (w *Workspace) Whole(ctx context.Context, ref, verb string) (*ent.StoredResult, error) {
	sr, err := w.client.StoredResult.Query().
		Where(storedresult.Ref(ref), storedresult.ConversationID(w.conv)).
		WithToolCall().
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, refusef("%s", tools.RefNotFound(ref))
	}
	if err != nil {
		return nil, fmt.Errorf("load stored result: %w", err)
	}
	call := sr.Edges.ToolCall
	switch {
	case call != nil && slices.Contains(windowTools, call.Name):
		return nil, refusef("it is a read window (%s output): use the ref it read, whose whole result is stored", call.Name)
	case call == nil || call.Outcome != schematype.OutcomeHits:
		outcome := "no call recorded"
		if call != nil {
			outcome = strings.ToLower(call.Outcome.String())
		}
		return nil, refusef("its call did not succeed (%s): only results of calls with hits can be %s", outcome, verb)
	case sr.TruncatedAtSource:
		return nil, refusef("the result was truncated at its source: its text is incomplete, so it is not %s", verb)
	case sr.Kind == schematype.KindMedia:
		return nil, refusef("the result is media, not text")
	}
	return sr, nil
}

// export selects and joins the text of an export's sources.
func (w *Workspace) export(ctx context.Context, ec *ExportContext) (string, error) {
	if len(ec.Sources) == 0 || len(ec.Sources) > MaxSources {
		return "", refusef("_toolResultContext.sources: give 1 to %d sources, not %d", MaxSources, len(ec.Sources))
	}
	loaded := map[string]*ent.StoredResult{}
	var b strings.Builder
	for j, src := range ec.Sources {
		text, err := w.selectSource(ctx, src, loaded)
		if err != nil {
			return "", refusef("source %d (ref %q): %v", j, src.Ref, err)
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		if b.Len()+len(text) > MaxFileBytes {
			return "", refusef("source %d (ref %q): the selection takes the file past %d bytes: select less with field or between", j, src.Ref, MaxFileBytes)
		}
		b.WriteString(text)
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD"), nil
}

// selectSource checks that a source's result may be exported and selects
// its text.
func (w *Workspace) selectSource(ctx context.Context, src *Source, loaded map[string]*ent.StoredResult) (string, error) {
	sr, ok := loaded[src.Ref]
	if !ok {
		var err error
		sr, err = w.Whole(ctx, src.Ref, "exported")
		if err != nil {
			return "", err
		}
		loaded[src.Ref] = sr
	}
	text := string(sr.Content)
	if len(src.Field) > 0 || sr.Kind == schematype.KindJSON {
		var err error
		text, err = walk(sr.Content, src.Field, sr.Kind)
		if err != nil {
			return "", err
		}
	}
	if src.Between != nil {
		var err error
		text, err = between(text, src.Between)
		if err != nil {
			return "", err
		}
	}
	return text, nil
}

// walk follows field through the stored JSON and returns the value it
// reaches: a string's decoded text, or other JSON as stored.
func walk(content []byte, field []FieldStep, kind schematype.ResultKind) (string, error) {
	cur := bytes.TrimSpace(content)
	if !json.Valid(cur) {
		if kind == schematype.KindJSON {
			return "", refusef("the stored JSON does not parse")
		}
		return "", refusef("the result is plain text, not JSON: leave out field")
	}
	for i, step := range field {
		if cur[0] == '"' {
			inner, ok := decodeJSONString(cur)
			if !ok {
				return "", refusef("field %s: %s is a string that is not JSON, so it has no %q", showField(field[:i+1]), where(field[:i]), step)
			}
			cur = inner
		}
		switch cur[0] {
		case '{':
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(cur, &obj); err != nil {
				return "", fmt.Errorf("decode object: %w", err)
			}
			v, ok := obj[string(step)]
			if !ok {
				return "", refusef("field %s: no key %q in %s (keys: %s)", showField(field[:i+1]), step, where(field[:i]), keyList(obj))
			}
			cur = bytes.TrimSpace(v)
		case '[':
			var list []json.RawMessage
			if err := json.Unmarshal(cur, &list); err != nil {
				return "", fmt.Errorf("decode list: %w", err)
			}
			n, err := strconv.Atoi(string(step))
			if err != nil || n < 0 {
				return "", refusef("field %s: %s is a list: give an index from 0, not %q", showField(field[:i+1]), where(field[:i]), step)
			}
			if n >= len(list) {
				return "", refusef("field %s: no element %d in %s (it has %d)", showField(field[:i+1]), n, where(field[:i]), len(list))
			}
			cur = bytes.TrimSpace(list[n])
		default:
			return "", refusef("field %s: %s is %s, so it has no %q", showField(field[:i+1]), where(field[:i]), kindOf(cur), step)
		}
	}
	if cur[0] == '"' {
		var s string
		if err := json.Unmarshal(cur, &s); err != nil {
			return "", fmt.Errorf("decode string: %w", err)
		}
		return s, nil
	}
	return string(cur), nil
}

// decodeJSONString decodes a JSON string whose text is itself JSON, as
// tools often return it.
func decodeJSONString(raw []byte) ([]byte, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false
	}
	inner := bytes.TrimSpace([]byte(s))
	if len(inner) == 0 || !json.Valid(inner) {
		return nil, false
	}
	return inner, true
}

func where(prefix []FieldStep) string {
	if len(prefix) == 0 {
		return "the result"
	}
	return showField(prefix)
}

func showField(f []FieldStep) string {
	parts := make([]string, len(f))
	for i, s := range f {
		parts[i] = strconv.Quote(string(s))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func kindOf(v []byte) string {
	switch v[0] {
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// keyList names an object's keys, sorted, at most ten, to help the model
// correct its field.
func keyList(obj map[string]json.RawMessage) string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	more := ""
	if len(keys) > 10 {
		more = fmt.Sprintf(", and %d more", len(keys)-10)
		keys = keys[:10]
	}
	for i, k := range keys {
		keys[i] = strconv.Quote(k)
	}
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ") + more
}

// between keeps the text strictly between delimiters [start, end], each of
// which must mark one place: start occurs once (an empty start is the
// beginning), and end once after it (an empty end is the end). With equal
// delimiters, the text must hold exactly two.
func between(text string, d []string) (string, error) {
	if len(d) != 2 {
		return "", refusef("between: give two delimiters, [start, end], not %d", len(d))
	}
	start, end := d[0], d[1]
	from := 0
	if start != "" {
		limit := 2
		if start == end {
			limit = 3
		}
		at, n := find(text, start, limit)
		switch {
		case n == 0:
			return "", refusef("between: start %q not found", start)
		case start == end && n == 1:
			return "", refusef("between: %q occurs once, so no region closes", start)
		case start == end && n > 2:
			return "", refusef("between: %q occurs %d times, so the region is ambiguous: use longer delimiters that occur once", start, count(text, start))
		case start != end && n > 1:
			return "", refusef("between: start %q occurs %d times, so the region is ambiguous: use a longer delimiter that occurs once", start, count(text, start))
		}
		from = at + len(start)
	}
	rest := text[from:]
	if end == "" {
		return rest, nil
	}
	at, n := find(rest, end, 2)
	switch {
	case n == 0:
		return "", refusef("between: end %q not found after the start", end)
	case n > 1 && start != end:
		return "", refusef("between: end %q occurs %d times after the start, so the region is ambiguous: use a longer delimiter that occurs once", end, count(rest, end))
	}
	return rest[:at], nil
}
