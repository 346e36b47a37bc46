package loop

import (
	"fmt"
	"testing"

	"entgo.io/ent/dialect"
)

func TestZZPrintPast(t *testing.T) {
	q, args, err := pastStatement(dialect.Postgres, pastValues{1, 2, 3, 4})
	fmt.Println(q)
	fmt.Println(args, err)
}
