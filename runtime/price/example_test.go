package price_test

import (
	"fmt"

	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/price"
)

func ExampleTable_Cost() {
	table := price.Default()
	usage := model.Usage{InputUncached: 2_000, CacheRead: 10_000, CacheWrite: 0, Output: 500}
	cost, ok := table.Cost("claude-sonnet-4-5-20250929", usage)
	fmt.Println(cost, cost.Amount(), ok)
	_, ok = table.Cost("my-own-model", usage)
	fmt.Println(ok)
	// Output:
	// $0.016500 0.016500 true
	// false
}
