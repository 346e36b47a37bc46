package preview_test

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/preview"
)

func ExampleBuild() {
	type order struct {
		ID    int      `json:"id"`
		Items []string `json:"items"`
		Note  string   `json:"note"`
	}
	var orders []order
	for i := range 50 {
		orders = append(orders, order{ID: i + 1, Items: []string{"pen", "ink"}, Note: "deliver to the back door, ring twice, and leave the parcel with the neighbour at number 12 if nobody answers"})
	}
	content, _ := json.Marshal(orders)

	res, err := preview.Build(schematype.KindJSON, content, preview.Context{Ref: "r_8f2k", Limit: 400})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Partial)
	fmt.Println(string(res.Body))
	// Output:
	// true
	// {"_toolResultContext":{"ref":"r_8f2k","chars":7492,"bytes":7492,"items":50,"partial":true},"items":[{"id":1,"items":["pen","ink"],"note":"deliver to the back door,…[+83 chars, 108 in all]"},{"id":2,"items":["pen","ink"],"note":"deliver to the back door,…[+83 chars, 108 in all]"},{"id":3,"items":["pen","ink"],"note":"deliver to the back door,…[+83 chars, 108 in all]"},"…[+47 items, 50 in all]"]}
}
