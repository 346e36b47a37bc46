package calc_test

import (
	"fmt"

	"github.com/toolgate/toolgate/tools/calc"
)

func ExampleEvaluate() {
	for _, expr := range []string{"2/3", "0.1+0.2", "2^3^2", "-2^2", "round(pi, 4)", "1e20*10"} {
		got, err := calc.Evaluate(expr)
		fmt.Println(expr, "=", got, err)
	}
	_, err := calc.Evaluate("(1+2))*3")
	fmt.Println(err)
	// Output:
	// 2/3 = 0.666666666667 <nil>
	// 0.1+0.2 = 0.3 <nil>
	// 2^3^2 = 512 <nil>
	// -2^2 = -4 <nil>
	// round(pi, 4) = 3.1416 <nil>
	// 1e20*10 = 1e+21 <nil>
	// unexpected ")" at character 6
}
