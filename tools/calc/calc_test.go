package calc_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/calc"
	"github.com/toolgate/toolgate/tools/tooltest"
)

func TestEvaluate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		give string
		want string
	}{
		// Rounding to 12 significant digits, no trailing zeros.
		{give: "2/3", want: "0.666666666667"},
		{give: "0.1+0.2", want: "0.3"},
		{give: "10/4", want: "2.5"},
		{give: "1e20*10", want: "1e+21"},
		{give: "1e20", want: "100000000000000000000"},
		{give: "2^64", want: "18446744073700000000"},
		{give: "1/3*3", want: "1"},
		{give: "1e-6", want: "0.000001"},
		{give: "1e-7", want: "1e-7"},
		{give: "-1/3e10", want: "-3.33333333333e-11"},
		{give: "123456789.123456789", want: "123456789.123"},
		{give: "0*-1", want: "0"},
		{give: "0.1+0.2-0.3", want: "0"},
		{give: "1e-20+1e-20", want: "2e-20"},
		{give: "1-1e-11", want: "0.99999999999"},
		{give: "1-1e-15", want: "1"},
		// Precedence and associativity.
		{give: "1+2*3", want: "7"},
		{give: "(1+2)*3", want: "9"},
		{give: "10-4-3", want: "3"},
		{give: "100/10/5", want: "2"},
		{give: "2^3^2", want: "512"},
		{give: "2**3**2", want: "512"},
		{give: "-2^2", want: "-4"},
		{give: "(-2)^2", want: "4"},
		{give: "2^-1", want: "0.5"},
		{give: "2*3^2", want: "18"},
		{give: "-3*-2", want: "6"},
		{give: "--3", want: "3"},
		{give: "+3", want: "3"},
		{give: "7%3", want: "1"},
		{give: "-7%3", want: "-1"},
		{give: "5.5%2", want: "1.5"},
		{give: "1+2%2", want: "1"},
		// Numbers.
		{give: ".5+5.", want: "5.5"},
		{give: "1.5E3", want: "1500"},
		{give: "2.5e-3", want: "0.0025"},
		{give: "1e-400", want: "0"},
		{give: " 1 +\t2 ", want: "3"},
		{give: "3 × 4 ÷ 2 − 1", want: "5"},
		// Functions and constants.
		{give: "sqrt(16)", want: "4"},
		{give: "abs(-2.5)", want: "2.5"},
		{give: "round(2.5)", want: "3"},
		{give: "round(-2.5)", want: "-3"},
		{give: "round(pi, 4)", want: "3.1416"},
		{give: "round(1234, -2)", want: "1200"},
		{give: "floor(-1.5)", want: "-2"},
		{give: "ceil(1.2)", want: "2"},
		{give: "ln(e)", want: "1"},
		{give: "log10(1000)", want: "3"},
		{give: "exp(1)", want: "2.71828182846"},
		{give: "sin(pi/2)", want: "1"},
		{give: "cos(pi)", want: "-1"},
		{give: "sin(pi)", want: "0"},
		{give: "tan(pi/4)", want: "1"},
		{give: "tan(pi)", want: "0"},
		{give: "cos(pi/2)", want: "0"},
		{give: "sin(1e-16)", want: "1e-16"},
		{give: "min(3, 1, 2)", want: "1"},
		{give: "max(3, -1, 2.5)", want: "3"},
		{give: "max(4)", want: "4"},
		{give: "PI", want: "3.14159265359"},
		{give: "Sqrt(2)^2", want: "2"},
		{give: "e^2", want: "7.38905609893"},
		{give: "sqrt(max(9, 16)) * (2 + 3)", want: "20"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			t.Parallel()
			got, err := calc.Evaluate(tt.give)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestEvaluateErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		give    string
		want    string
		wantPos int
	}{
		{give: "(1+2))*3", want: `unexpected ")" at character 6`, wantPos: 6},
		{give: "1 + (2*3))", want: `unexpected ")" at character 10`, wantPos: 10},
		{give: "foo(1)", want: `unknown function "foo" at character 1`, wantPos: 1},
		{give: "2 * x", want: `unknown name "x" at character 5`, wantPos: 5},
		{give: "log(100)", want: `unknown function "log"; use ln or log10 at character 1`, wantPos: 1},
		{give: "1/0", want: `division by zero at character 2`, wantPos: 2},
		{give: "5 % (2-2)", want: `division by zero at character 3`, wantPos: 3},
		{give: "0^-1", want: `division by zero at character 2`, wantPos: 2},
		{give: "10^400", want: `result too large at character 3`, wantPos: 3},
		{give: "1e308*10", want: `result too large at character 6`, wantPos: 6},
		{give: "exp(1000)", want: `result too large at character 1`, wantPos: 1},
		{give: "1e999", want: `number "1e999" is too large at character 1`, wantPos: 1},
		{give: "(-8)^(1/3)", want: `result is not a number at character 5`, wantPos: 5},
		{give: "sqrt(-1)", want: `sqrt of a negative number at character 1`, wantPos: 1},
		{give: "2 + ln(0)", want: `ln needs a positive number at character 5`, wantPos: 5},
		{give: "sqrt(1, 2)", want: `sqrt takes 1 argument, got 2 at character 1`, wantPos: 1},
		{give: "round(1, 2, 3)", want: `round takes 1 or 2 arguments, got 3 at character 1`, wantPos: 1},
		{give: "round(1, 0.5)", want: `round takes a whole number of digits from -15 to 15 at character 1`, wantPos: 1},
		{give: "min()", want: `min takes at least 1 argument, got 0 at character 1`, wantPos: 1},
		{give: "sqrt 4", want: `expected "(" after sqrt at character 6`, wantPos: 6},
		{give: "(1+2", want: `missing ")" for the "(" opened at character 1`, wantPos: 1},
		{give: "max(1, 2", want: `missing ")" for the "(" opened at character 4`, wantPos: 4},
		{give: "1 +", want: `unexpected end of expression at character 4`, wantPos: 4},
		{give: "2 3", want: `unexpected "3" at character 3`, wantPos: 3},
		{give: "2pi", want: `unexpected "pi" at character 2`, wantPos: 2},
		{give: "*2", want: `unexpected "*" at character 1`, wantPos: 1},
		{give: "1.2.3", want: `malformed number "1.2.3" at character 1`, wantPos: 1},
		{give: "π × 2", want: `unknown name "π" at character 1`, wantPos: 1},
		{give: "é + $", want: `unexpected character "$" at character 5`, wantPos: 5},
		{give: "import os", want: `unknown name "import" at character 1`, wantPos: 1},
		{give: "", want: `empty expression`, wantPos: 0},
		{give: "   ", want: `empty expression`, wantPos: 0},
		{give: strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300), want: `expression nested too deeply at character 101`, wantPos: 101},
		{give: strings.Repeat("-", 300) + "1", want: `expression nested too deeply at character 201`, wantPos: 201},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			t.Parallel()
			got, err := calc.Evaluate(tt.give)
			require.Empty(t, got)
			require.EqualError(t, err, tt.want)
			var calcErr *calc.Error
			require.ErrorAs(t, err, &calcErr)
			require.Equal(t, tt.wantPos, calcErr.Pos)
		})
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()

	tests := []struct {
		give float64
		want string
	}{
		{give: 0, want: "0"},
		{give: math.Copysign(0, -1), want: "0"},
		{give: 1e21, want: "1e+21"},
		{give: 999999999999.4, want: "999999999999"},
		{give: 999999999999.5, want: "1000000000000"},
		{give: -1.5e-300, want: "-1.5e-300"},
		{give: math.MaxFloat64, want: "1.79769313486e+308"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, calc.Format(tt.give))
		})
	}
}

func TestDefinition(t *testing.T) {
	t.Parallel()
	d := calc.Definition

	require.Equal(t, "calculator", d.Name)
	require.Equal(t, "calc", d.Family)
	require.Equal(t, tools.OfferAlways, d.Offered)
	require.True(t, d.AlwaysOn())
	require.Equal(t, tools.EffectRead, d.Effect)
	require.Equal(t, tools.PreviewExempt, d.Preview)
	require.Empty(t, d.Guidance)
	// Every turn pays for this description.
	require.LessOrEqual(t, len(d.Description), 600, "every turn pays for it")

	schema := tooltest.Schema(t, d.Schema)
	require.True(t, tooltest.Valid(t, schema, `{"expression": "1+1"}`))
	for _, give := range []string{`{}`, `{"expression": 2}`, `{"expression": "1", "x": 1}`} {
		require.False(t, tooltest.Valid(t, schema, give), give)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = calc.Evaluate("round(sqrt(2)^2 * (1.5e3 - 12) / 7, 4) + max(1, 2, 3) % 2")
	}
}
