package graph

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/stretchr/testify/require"
)

// TestAppendCompactIsMarshal: a response written by the POST transport is
// byte for byte what gqlgen's json.Marshal of it gives.
func TestAppendCompactIsMarshal(t *testing.T) {
	for _, data := range []string{
		`{}`, `null`, `[]`, `"x"`, `{"a":1}`,
		`{"viewer":{"name":"Ada <ada@example.com> & co","id":"tg1"}}`,
		"{ \"a\" : [ 1 , 2 ,\t3 ] ,\n\"b\" :\r\n{ } }",
		`{"s":"a \" quote, a \\ backslash, \\\" both, \u003c already escaped, a tab\t"}`,
		`{"s":"</script><script>alert(1)</script>"}`,
		"{\"s\":\"line\u2028separator\u2029paragraph, é, 日本, 🙂\"}",
		`{"s":"ends in a backslash \\"}`,
		`{"k<":"v>","n":[true,false,null,-1.5e10]}`,
		`{"s":" spaces  inside "}`,
	} {
		want, err := json.Marshal(&graphql.Response{Data: json.RawMessage(data)})
		require.NoError(t, err, data)
		got := append([]byte(`{"data":`), appendCompact(nil, []byte(data))...)
		got = append(got, '}')
		require.Equal(t, string(want), string(got), data)
	}
	// A long answer, as a transcript is.
	var b strings.Builder
	b.WriteString(`{"turns":[`)
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`{"text":"<b>bold</b> & \"quoted\"` + "\u2028" + `", "n": 12}`)
	}
	b.WriteString(`]}`)
	want, err := json.Marshal(&graphql.Response{Data: json.RawMessage(b.String())})
	require.NoError(t, err)
	got := append([]byte(`{"data":`), appendCompact(nil, []byte(b.String()))...)
	require.Equal(t, string(want), string(append(got, '}')))
}

func BenchmarkAppendCompact(b *testing.B) {
	var s strings.Builder
	s.WriteString(`{"turns":[`)
	for i := range 2000 {
		if i > 0 {
			s.WriteString(",")
		}
		s.WriteString(`{"id":"tgt94bte4kxwckc","text":"Revenue grew 12% in the north & the west; see <notes>.","status":"COMPLETED"}`)
	}
	s.WriteString(`]}`)
	data := []byte(s.String())
	b.Run("marshal", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			_, _ = json.Marshal(&graphql.Response{Data: data})
		}
	})
	b.Run("appendCompact", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		buf := make([]byte, 0, len(data)+64)
		for b.Loop() {
			buf = appendCompact(buf[:0], data)
		}
	})
}
