package embed_test

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/tools/embed"
)

// Several texts go in one call, and so in one request; the dot product of
// two vectors is their cosine similarity.
func Example() {
	e, err := embed.New(embed.Config{Provider: embed.ProviderLocal})
	if err != nil {
		panic(err)
	}
	v, err := e.Embed(context.Background(), []string{
		"when is the reimbursement deadline",
		"Expenses are reimbursed until the 5th of the following month.",
		"The cafeteria opens at noon.",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Model(), e.Lexical())
	fmt.Println(embed.Dot(v[0], v[1]) > embed.Dot(v[0], v[2]))
	// Output:
	// local-lexical-v1 true
	// true
}
