package schematype

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMicrosAmountIsExact(t *testing.T) {
	for m, want := range map[Micros]string{
		0: "0.000000", 1: "0.000001", 12_500_000: "12.500000", -1_500_000: "-1.500000",
		9_007_199_254_740_993: "9007199254.740993", // past float64's exact integers
	} {
		require.Equal(t, want, m.Amount())
	}
	require.Equal(t, "$12.50", Micros(12_500_000).String())
	require.Equal(t, "$0.000123", Micros(123).String())
	require.Equal(t, "$0.00", Micros(0).String())
	require.Equal(t, "USD", Micros(5).Currency())
}

func TestParseMicros(t *testing.T) {
	for in, want := range map[string]Micros{
		"12": 12_000_000, "12.5": 12_500_000, "0.000001": 1, ".25": 250_000, "7.": 7_000_000,
		" 3.10 ": 3_100_000, "9007199254.740993": 9_007_199_254_740_993,
	} {
		got, err := ParseMicros(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", ".", "-1", "1e3", "0.0000001", "12,50", "NaN", "1.2.3", "99999999999999999999"} {
		_, err := ParseMicros(in)
		require.Error(t, err, in)
	}
	// Whatever Amount writes, ParseMicros reads back.
	for _, m := range []Micros{0, 1, 999_999, 1_000_000, 123_456_789} {
		got, err := ParseMicros(m.Amount())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
}
