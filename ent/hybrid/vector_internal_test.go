package hybrid

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The one vector encoding round-trips, and a blob that is not whole
// float32s is refused.
func TestVectorRoundTrip(t *testing.T) {
	t.Parallel()
	v := []float32{0.25, -1, 3.5e-7, 0}
	got, err := unmarshal(marshal(v))
	require.NoError(t, err)
	require.Equal(t, v, got)
	_, err = unmarshal([]byte{1, 2, 3})
	require.Error(t, err)
}
