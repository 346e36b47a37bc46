package calc_test

import (
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools/calc"
)

// FuzzEvaluate checks that Evaluate never panics, answers only finite
// numbers, and points errors inside the expression (or just past its end).
func FuzzEvaluate(f *testing.F) {
	for _, seed := range []string{"2/3", "-2^-2^2", "round(pi, 4) % 3", "max(1, 2, sqrt(2))", "(1+2))", "1e308*10", "ln(0)", "×÷−", "2**3**2"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		got, err := calc.Evaluate(expr)
		if err != nil {
			var calcErr *calc.Error
			require.ErrorAs(t, err, &calcErr)
			require.LessOrEqual(t, calcErr.Pos, utf8.RuneCountInString(expr)+1)
			return
		}
		x, err := strconv.ParseFloat(got, 64)
		require.NoError(t, err)
		require.Equal(t, got, calc.Format(x))
	})
}
