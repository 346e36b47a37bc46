package graph

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/stretchr/testify/require"
)

// TestAppendStringAsGqlgen holds the hot path's string writing to gqlgen's
// MarshalString byte for byte: every single byte, control characters
// among text, characters of two to four bytes, U+2028, and bytes that are
// not UTF-8 (cut characters, lone continuation bytes).
func TestAppendStringAsGqlgen(t *testing.T) {
	t.Parallel()
	tests := []string{"", "plain", `a "quoted" \ path`, "tab\there\r\nnew", "\x00\x01\x1f\x7f", "é ü 中文 🙂",
		"line\u2028sep\u2029", "\xff\xfe", "cut \xe4\xb8", "lone \x80\xbf", "\xe4\xb8\x00", "<b>&amp;</b>"}
	for c := range 256 {
		tests = append(tests, string([]byte{byte(c)}), "x"+string([]byte{byte(c)})+"y")
	}
	for _, give := range tests {
		var want bytes.Buffer
		graphql.MarshalString(give).MarshalGQL(&want)
		require.Equal(t, want.String(), string(appendString(nil, give)), "%q", give)
	}
}

// TestAppendEnumAsQuote holds the hot path's enum writing to
// strconv.Quote, as the enums' MarshalGQL write: values of printable
// ASCII, and any other text.
func TestAppendEnumAsQuote(t *testing.T) {
	t.Parallel()
	tests := []string{"", "COMPLETED", "in_progress", "a b~", `q"uote`, `back\slash`, "tab\t", "\x7f", "é", "\xff"}
	for c := range 256 {
		tests = append(tests, "A"+string([]byte{byte(c)}))
	}
	for _, give := range tests {
		require.Equal(t, strconv.Quote(give), string(appendEnum(nil, give)), "%q", give)
	}
}
