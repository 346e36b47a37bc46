package gid

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range []int{0, 1, 2, 4294967296, 4294967297, 1 << 40, 1<<62 - 1} {
		s := Encode(id)
		got, err := Decode(s)
		require.NoError(t, err)
		require.Equal(t, id, got, s)
		require.Equal(t, "x"+s, string(Append([]byte("x"), id)))
	}
	for _, pair := range [][2]int{{1, 2}, {4294967297, 8589934593}} {
		a, b := Encode(pair[0]), Encode(pair[1])
		require.NotEqual(t, a[:8], b[:8], "neighbours must not look alike")
		require.NotEqual(t, a[8:], b[8:], "neighbours must not look alike")
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ give string }{
		{give: ""}, {give: "tg"}, {give: "42"}, {give: "xx0000000000000"},
		{give: Encode(5) + "0"}, {give: "tgUUUUUUUUUUUUU"},
	}
	for _, tt := range tests {
		_, err := Decode(tt.give)
		require.ErrorIs(t, err, ErrInvalid, tt.give)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(7))
	f.Add("tg0000000000000")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Decode(s)
		if err == nil {
			require.Equal(t, s, Encode(id))
		}
	})
}
