package db

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLikeMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, text string
		esc           rune
		want          bool
	}{
		{pattern: "%Lovelace%", text: "Ada\x00Lovelace notes", esc: -1, want: true},
		{pattern: "%a\x00L%", text: "Ada\x00Lovelace", esc: -1, want: true},
		{pattern: "%a\x00X%", text: "Ada\x00Lovelace", esc: -1, want: false},
		{pattern: "abc", text: "ABC", esc: -1, want: true},
		{pattern: "é", text: "É", esc: -1, want: false},
		{pattern: "a_c", text: "abc", esc: -1, want: true},
		{pattern: "a_c", text: "aéc", esc: -1, want: true},
		{pattern: "a_c", text: "ac", esc: -1, want: false},
		{pattern: "%", text: "", esc: -1, want: true},
		{pattern: "_", text: "", esc: -1, want: false},
		{pattern: "%b%b%", text: "abab", esc: -1, want: true},
		{pattern: "%b%c", text: "abab", esc: -1, want: false},
		{pattern: `50\%`, text: "50%", esc: '\\', want: true},
		{pattern: `50\%`, text: "500", esc: '\\', want: false},
		{pattern: `%\_x%`, text: "a_x", esc: '\\', want: true},
		{pattern: `%\_x%`, text: "abx", esc: '\\', want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, likeMatch(tt.pattern, tt.text, tt.esc), "%q LIKE %q", tt.text, tt.pattern)
	}
}
