package token_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/offer/token"
)

func TestCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want int
	}{
		{give: "", want: 0},
		{give: "hello world", want: 2},
		{give: `{"name":"calculator"}`, want: 5}, // {" name ":" calculator "}
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, token.Count(tt.give), tt.give)
	}
}
