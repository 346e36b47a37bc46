package graph

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
)

func TestGroundingMergesSpansPerRef(t *testing.T) {
	t.Parallel()
	calls := []*ent.ToolCall{
		{Evidence: []schematype.Span{{Ref: "r_b", Start: 10, End: 20}, {Ref: "r_a", Start: 0, End: 5}}},
		{Evidence: []schematype.Span{{Ref: "r_b", Start: 15, End: 30}, {Ref: "r_b", Start: 40, End: 50}, {Ref: "r_a", Start: 3, End: 3}}},
		{Evidence: []schematype.Span{}},
	}
	g := grounding(calls)
	require.Equal(t, []*schematype.Span{
		{Ref: "r_b", Start: 10, End: 30},
		{Ref: "r_b", Start: 40, End: 50},
		{Ref: "r_a", Start: 0, End: 5},
	}, g.Sources)
	require.Equal(t, 35, g.CoveredChars)
	require.Empty(t, grounding(nil).Sources)
}
