package preview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
)

// decode unmarshals a preview, failing on anything but one valid JSON object.
func decode(t *testing.T, body []byte) map[string]any {
	t.Helper()
	require.True(t, json.Valid(body), "preview is not valid JSON: %s", body)
	require.True(t, utf8.Valid(body))
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	return m
}

// keysInOrder returns the top-level keys of a JSON object in document order.
func keysInOrder(t *testing.T, body []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

func TestMeasure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind schematype.ResultKind
		give string
		want Counts
	}{
		{"text lines", Text, "a\nb\nc", Counts{Chars: 5, Bytes: 5, Items: 3}},
		{"text trailing newline", Text, "a\nb\n", Counts{Chars: 4, Bytes: 4, Items: 2}},
		{"text empty", Text, "", Counts{}},
		{"text multi-byte", Text, "héllo wörld ✓", Counts{Chars: 13, Bytes: 17, Items: 1}},
		{"text invalid UTF-8 counts a byte each", Text, "a\xffb\xe2\x82", Counts{Chars: 5, Bytes: 5, Items: 1}},
		{"json array", JSON, `[1, "two", {"three": [3, 3]}]`, Counts{Chars: 29, Bytes: 29, Items: 3}},
		{"json object", JSON, `{"a": 1, "b": [1, 2], "c": {}}`, Counts{Chars: 30, Bytes: 30, Items: 3}},
		{"json empty array", JSON, " [ ] ", Counts{Chars: 5, Bytes: 5, Items: 0}},
		{"json scalar", JSON, `"naïve"`, Counts{Chars: 7, Bytes: 8, Items: 1}},
		{"malformed json counts lines", JSON, "[1,\n2,\n", Counts{Chars: 7, Bytes: 7, Items: 2}},
		{"media", Media, "\x89PNG\r\n", Counts{Bytes: 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Measure(tt.kind, []byte(tt.give)))
		})
	}
}

func TestBuildPassesWhole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		kind  schematype.ResultKind
		give  string
		limit int
	}{
		{"short text", Text, "all of it", 0},
		{"text exactly at the limit", Text, strings.Repeat("é", 300), 300},
		{"short json kept as written", JSON, "{ \"a\" : [1, 2] }", 0},
		{"malformed json that fits", JSON, `{"a": `, 0},
		{"media of any size", Media, strings.Repeat("\x00\xff", 10000), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			content := []byte(tt.give)
			res, err := Build(tt.kind, content, Context{Ref: "r_1", Limit: tt.limit})
			require.NoError(t, err)
			require.False(t, res.Partial)
			require.Equal(t, tt.give, string(res.Body))
			require.Equal(t, []Span{{0, int64(len(content))}}, res.Visible)
		})
	}
}

func TestBuildCompactsJSONThatFitsWithoutWhitespace(t *testing.T) {
	t.Parallel()
	records := make([]map[string]any, 20)
	for i := range records {
		records[i] = map[string]any{"id": i, "name": "item"}
	}
	pretty, err := json.MarshalIndent(records, "", "          ")
	require.NoError(t, err)
	compact, err := json.Marshal(records)
	require.NoError(t, err)
	require.Greater(t, len(pretty), 1000)
	require.Less(t, len(compact), 1000)

	res, err := Build(JSON, pretty, Context{Ref: "r_1", Limit: 1000})
	require.NoError(t, err)
	require.False(t, res.Partial)
	require.Equal(t, string(compact), string(res.Body))
}

func TestBuildJSONArray(t *testing.T) {
	t.Parallel()
	content := benchJSON(t, 1<<20)
	var records []map[string]any
	require.NoError(t, json.Unmarshal(content, &records))
	counts := Measure(JSON, content)
	require.Equal(t, int64(len(records)), counts.Items)

	res, err := Build(JSON, content, Context{Ref: "r_arr", Counts: counts})
	require.NoError(t, err)
	require.True(t, res.Partial)
	require.LessOrEqual(t, utf8.RuneCount(res.Body), DefaultLimit)
	require.Greater(t, utf8.RuneCount(res.Body), DefaultLimit-200, "the budget should be used")
	require.Equal(t, []string{"_toolResultContext", "items"}, keysInOrder(t, res.Body))

	m := decode(t, res.Body)
	require.Equal(t, map[string]any{
		"ref": "r_arr", "chars": float64(counts.Chars), "bytes": float64(counts.Bytes),
		"items": float64(len(records)), "partial": true,
	}, m["_toolResultContext"])
	items := m["items"].([]any)
	require.GreaterOrEqual(t, len(items), minItems+1)
	shown := len(items) - 1
	require.Equal(t, fmt.Sprintf("…[+%d items, %d in all]", len(records)-shown, len(records)), items[shown])
	for i, it := range items[:shown] {
		rec := it.(map[string]any)
		require.Equal(t, records[i]["id"], rec["id"])
		require.Len(t, rec, len(records[i]), "every key of a shown record is kept")
	}
}

func TestBuildJSONObjectKeepsKeysAndCutsLongValues(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Quarterly résumé ", 1000) // 17,000 characters
	numbers := make([]int, 3000)
	for i := range numbers {
		numbers[i] = i
	}
	content, err := json.Marshal(map[string]any{"a": "short", "b": long, "c": numbers, "d": true})
	require.NoError(t, err)

	res, err := Build(JSON, content, Context{Ref: "r_obj"})
	require.NoError(t, err)
	require.True(t, res.Partial)
	require.LessOrEqual(t, utf8.RuneCount(res.Body), DefaultLimit)
	require.Equal(t, []string{"_toolResultContext", "a", "b", "c", "d"}, keysInOrder(t, res.Body))

	m := decode(t, res.Body)
	require.Equal(t, "short", m["a"])
	require.Equal(t, true, m["d"])
	b := m["b"].(string)
	cut := strings.Index(b, "…[+")
	require.Positive(t, cut)
	head := b[:cut]
	require.True(t, strings.HasPrefix(long, head))
	require.Equal(t, fmt.Sprintf("…[+%d chars, 17000 in all]", 17000-utf8.RuneCountInString(head)), b[cut:])
	c := m["c"].([]any)
	require.Equal(t, float64(0), c[0])
	require.Equal(t, float64(1), c[1])
	require.Equal(t, fmt.Sprintf("…[+%d items, 3000 in all]", 3000-(len(c)-1)), c[len(c)-1])
	require.Greater(t, len(c), 100, "small items are shown whole while they fit")
}

func TestBuildJSONGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		give        string
		wantBody    string
		wantVisible []Span
	}{
		{
			name:        "object with a long string",
			give:        `{"title":"` + strings.Repeat("abcdefghij", 100) + `","n":1,"tags":["x","y"]}`,
			wantBody:    `{"_toolResultContext":{"ref":"r_1","chars":1035,"bytes":1035,"items":3,"partial":true},"title":"` + strings.Repeat("abcdefghij", 15) + `ab…[+848 chars, 1000 in all]","n":1,"tags":["x","y"]}`,
			wantVisible: []Span{{1, 162}, {1012, 1034}},
		},
		{
			name:        "array of small records",
			give:        `[` + strings.Repeat(`{"id":1,"name":"alpha beta gamma"}, `, 40) + `{"id":2}]`,
			wantBody:    `{"_toolResultContext":{"ref":"r_1","chars":1450,"bytes":1450,"items":41,"partial":true},"items":[` + strings.Repeat(`{"id":1,"name":"alpha beta gamma"},`, 5) + `"…[+36 items, 41 in all]"]}`,
			wantVisible: []Span{{1, 179}},
		},
		{
			name:        "scalar string with escapes",
			give:        `"` + strings.Repeat(`é\n`, 400) + `"`,
			wantBody:    `{"_toolResultContext":{"ref":"r_1","chars":1202,"bytes":1602,"items":1,"partial":true},"value":"` + strings.Repeat(`é\n`, 59) + `…[+682 chars, 800 in all]"}`,
			wantVisible: []Span{{0, 237}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := Build(JSON, []byte(tt.give), Context{Ref: "r_1", Limit: 300})
			require.NoError(t, err)
			require.True(t, res.Partial)
			require.Equal(t, tt.wantBody, string(res.Body))
			require.LessOrEqual(t, utf8.RuneCount(res.Body), 300)
			require.Equal(t, tt.wantVisible, res.Visible)
		})
	}
}

func TestBuildTruncatedAtSource(t *testing.T) {
	t.Parallel()
	content := []byte(strings.Repeat("word ", 5000))
	res, err := Build(Text, content, Context{Ref: "r_t", TruncatedAtSource: true})
	require.NoError(t, err)
	ctx := decode(t, res.Body)["_toolResultContext"].(map[string]any)
	require.Equal(t, true, ctx["truncatedAtSource"])
	require.Equal(t, true, ctx["partial"])
}

func TestBuildText(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "line %d: naïve \"quoted\" text\twith a tab\n", i)
	}
	text := b.String()
	tests := []struct {
		name  string
		kind  schematype.ResultKind
		give  string
		limit int
	}{
		{"text", Text, text, 0},
		{"small limit", Text, text, MinLimit},
		{"one long line", Text, strings.Repeat("ab✓", 10000), 0},
		{"malformed json previews as text", JSON, `[{"a": "` + text, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			content := []byte(tt.give)
			counts := Measure(tt.kind, content)
			res, err := Build(tt.kind, content, Context{Ref: "r_text", Limit: tt.limit})
			require.NoError(t, err)
			require.True(t, res.Partial)
			limit := cmpOr(tt.limit, DefaultLimit)
			require.LessOrEqual(t, utf8.RuneCount(res.Body), limit)
			require.Equal(t, []string{"_toolResultContext", "head", "omitted", "tail"}, keysInOrder(t, res.Body))

			m := decode(t, res.Body)
			require.Equal(t, float64(counts.Items), m["_toolResultContext"].(map[string]any)["items"])
			head, tail := m["head"].(string), m["tail"].(string)
			omitted := m["omitted"].(map[string]any)
			from, to := int(omitted["fromChar"].(float64)), int(omitted["toChar"].(float64))
			runes := []rune(tt.give)
			require.Equal(t, string(runes[:from]), head)
			require.Equal(t, string(runes[to:]), tail)
			require.Greater(t, to, from)
			require.NotEmpty(t, tail)
			require.Equal(t, []Span{{0, int64(len(head))}, {int64(len(tt.give) - len(tail)), int64(len(tt.give))}}, res.Visible)
		})
	}
}

func TestBuildTextCutsAfterLineBreaks(t *testing.T) {
	t.Parallel()
	content := []byte(strings.Repeat("a line of text that is long enough\n", 1000))
	res, err := Build(Text, content, Context{Ref: "r_1"})
	require.NoError(t, err)
	m := decode(t, res.Body)
	require.True(t, strings.HasSuffix(m["head"].(string), "enough\n"))
	require.True(t, strings.HasPrefix(m["tail"].(string), "a line"))
}

func TestBuildTextReplacesInvalidUTF8(t *testing.T) {
	t.Parallel()
	content := []byte(strings.Repeat("ok \xff\xfe ", 3000))
	res, err := Build(Text, content, Context{Ref: "r_1"})
	require.NoError(t, err)
	m := decode(t, res.Body)
	require.True(t, strings.HasPrefix(m["head"].(string), "ok \uFFFD\uFFFD ok"))
	require.LessOrEqual(t, utf8.RuneCount(res.Body), DefaultLimit)
}

func TestBuildVisibleSpansPointAtShownContent(t *testing.T) {
	t.Parallel()
	content := benchJSON(t, 200<<10)
	res, err := Build(JSON, content, Context{Ref: "r_1", Limit: 2000})
	require.NoError(t, err)
	require.NotEmpty(t, res.Visible)
	var prev int64 = -1
	for _, s := range res.Visible {
		require.Greater(t, s.Start, prev)
		require.Greater(t, s.End, s.Start)
		require.LessOrEqual(t, s.End, int64(len(content)))
		prev = s.End
		// A span's text is in the preview: whole values verbatim (the
		// generator writes compact JSON), cut strings by their head.
		shown := content[s.Start:s.End]
		if len(shown) > 40 {
			shown = shown[:40]
		}
		require.True(t, bytes.Contains(res.Body, shown), "span %v (%q) is not in the preview", s, shown)
	}
}

func TestBuildErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind schematype.ResultKind
		ctx  Context
		want string
	}{
		{"limit below the minimum", Text, Context{Limit: 100}, "build preview: limit 100 is below 256"},
		{"unknown kind", schematype.ResultKind("pdf"), Context{}, `build preview: unknown kind "pdf"`},
		{"ref too long for the limit", Text, Context{Ref: strings.Repeat("r", 300), Limit: MinLimit}, "build preview: limit 256 leaves no room beside the result context"},
		{"json ref too long for the limit", JSON, Context{Ref: strings.Repeat("r", 300), Limit: MinLimit}, "build preview: limit 256 leaves no room beside the result context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			content := []byte("[" + strings.Repeat(`"xyz",`, 1000) + "1]")
			_, err := Build(tt.kind, content, tt.ctx)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestScannerValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want bool
	}{
		{`{"a":1}`, true},
		{` [ 1 , -2.5e+3 , true , false , null , "x" , { } , [ ] ] `, true},
		{`"é\u00e9\ud83d\ude00\n\/"`, true},
		{`"\ud800"`, true},
		{`0`, true},
		{`-0.0E-0`, true},
		{``, false},
		{` `, false},
		{`[1,2,]`, false},
		{`[1 2]`, false},
		{`{"a" 1}`, false},
		{`{"a":1,}`, false},
		{`{1:1}`, false},
		{`01`, false},
		{`1.`, false},
		{`-`, false},
		{`1e`, false},
		{`tru`, false},
		{`nul`, false},
		{`[1]]`, false},
		{`[1] x`, false},
		{"\"\x01\"", false},
		{`"\u12"`, false},
		{`"\x"`, false},
		{"\"\xff\"", false},
		{`"abc`, false},
		{`"abc\"`, false},
		{strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), true},
		{strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%.20q", tt.give), func(t *testing.T) {
			t.Parallel()
			// A budget this large records every value, so every string is checked.
			s := newScanner([]byte(tt.give), 1<<30, maxNodes)
			require.Equal(t, tt.want, s.run())
			if len(tt.give) < 100 {
				require.Equal(t, json.Valid([]byte(tt.give)) && utf8.ValidString(tt.give), tt.want)
			}
		})
	}
}

func TestCountChars(t *testing.T) {
	t.Parallel()
	for _, give := range []string{"", "abc", "héllo wörld, ✓ 😀 done", "\xff\xfe", "ab\xe2\x82", strings.Repeat("naïve ", 100)} {
		require.Equal(t, utf8.RuneCountInString(give), countChars([]byte(give)), "%q", give)
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}
