package tools_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools"
)

// Folding matches what simple case folding makes equal, and keeps the
// count of characters.
func TestFold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text, word string
		want       bool
	}{
		{text: "Ärger im Büro", word: "ärger", want: true},
		{text: "Ärger im Büro", word: "BÜRO", want: true},
		{text: "Ærøskøbing", word: "ÆRØ", want: true},
		{text: "ΣΊΣΥΦΟΣ", word: "σίσυφος", want: true},
		{text: "temperature 3K", word: "3\u212a", want: true}, // Kelvin sign
		{text: "Straße", word: "STRASSE", want: false},        // simple folding only
		{text: "Budget", word: "budgets", want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, strings.Contains(tools.Fold(tt.text), tools.Fold(tt.word)), tt.text+" / "+tt.word)
		require.Equal(t, utf8.RuneCountInString(tt.text), utf8.RuneCountInString(tools.Fold(tt.text)), "folding keeps the count of characters")
	}
}
