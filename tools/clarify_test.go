package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseClarify(t *testing.T) {
	t.Parallel()
	yes := "Yes"
	tests := []struct {
		give string
		want Clarification
	}{
		{give: `{"question": " Which year? "}`, want: Clarification{Question: "Which year?", Options: []string{}}},
		{give: `{"question": "Go on?", "options": ["Yes", " No "], "recommended": "Yes"}`,
			want: Clarification{Question: "Go on?", Options: []string{"Yes", "No"}, Recommended: &yes}},
		{give: `{"question": "Go on?", "options": ["Yes", "No"], "recommended": ["Yes"]}`,
			want: Clarification{Question: "Go on?", Options: []string{"Yes", "No"}, Recommended: &yes}},
		{give: `{"question": "Go on?", "options": ["Yes", "No"], "recommended": null}`,
			want: Clarification{Question: "Go on?", Options: []string{"Yes", "No"}}},
		{give: `{"question": "Go on?", "options": ["a", "b", "c", "d", "e", "f"], "recommended": []}`,
			want: Clarification{Question: "Go on?", Options: []string{"a", "b", "c", "d", "e", "f"}}},
	}
	for _, tt := range tests {
		got, err := ParseClarify(json.RawMessage(tt.give))
		require.NoError(t, err, tt.give)
		require.Equal(t, tt.want, got, tt.give)
	}
}

func TestParseClarifyRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want string
	}{
		{give: `{}`, want: "question: ask one question"},
		{give: `{"question": "  "}`, want: "question: ask one question"},
		{give: `{"question": ["a?", "b?"]}`, want: "read clarify arguments"},
		{give: `{"question": "` + strings.Repeat("x", 1001) + `"}`, want: "question: at most 1000 characters, got 1001"},
		{give: `{"question": "q", "options": ["a", "b", "c", "d", "e", "f", "g"]}`, want: "options: at most 6, got 7"},
		{give: `{"question": "q", "options": ["a", " "]}`, want: "options[1]: empty"},
		{give: `{"question": "q", "options": ["a", "a"]}`, want: `options[1]: "a" is offered twice`},
		{give: `{"question": "q", "options": ["` + strings.Repeat("é", 201) + `"]}`, want: "options[0]: at most 200 characters"},
		{give: `{"question": "q", "options": ["a", "b"], "recommended": "c"}`, want: `recommended: "c" is not one of the options`},
		{give: `{"question": "q", "recommended": "c"}`, want: `recommended: "c" is not one of the options`},
		{give: `{"question": "q", "options": ["a", "b"], "recommended": ["a", "b"]}`, want: "recommended: at most one option, got 2"},
		{give: `{"question": "q", "options": ["a"], "recommended": 1}`, want: "recommended: want one of the options"},
		{give: `{"question": "q", "choices": ["a"]}`, want: `unknown field "choices"`},
	}
	for _, tt := range tests {
		_, err := ParseClarify(json.RawMessage(tt.give))
		require.ErrorContains(t, err, tt.want, tt.give)
	}
}
