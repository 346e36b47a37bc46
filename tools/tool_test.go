package tools

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsAbsent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want bool
	}{
		{give: `null`, want: true},
		{give: `""`, want: true},
		{give: `[]`, want: true},
		{give: `{}`, want: true},
		{give: `{"hits": [], "total": 0}`, want: true},
		{give: `{"hits": [], "failures": [{"item": 0, "message": "x"}]}`, want: true},
		{give: `{"hits": [{"a": 1}]}`, want: false},
		{give: `{"value": "0.5"}`, want: false},
		{give: `0`, want: false},
		{give: `false`, want: false},
		{give: `"text"`, want: false},
		{give: `not json`, want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, IsAbsent(json.RawMessage(tt.give)), tt.give)
	}
}
