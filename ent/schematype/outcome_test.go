package schematype_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent/schematype"
)

// Only a call that ran without failing succeeded: one that matched nothing
// did, one that waits, never ran or may have run did not.
func TestOutcomeSucceeded(t *testing.T) {
	for _, o := range schematype.Outcome("").Values() {
		want := o == "HITS" || o == "ABSENCE"
		require.Equal(t, want, schematype.Outcome(o).Succeeded(), o)
	}
}
