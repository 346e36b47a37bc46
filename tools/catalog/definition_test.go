package catalog_test

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/tooltest"
)

func TestDefinitions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		valid   []string
		invalid []string
	}{
		{
			name:    "search_tools",
			valid:   []string{`{"queries": ["files"]}`, `{"queries": ["a", "b", "c", "d", "e", "a"]}`},
			invalid: []string{`{}`, `{"queries": []}`, `{"queries": "files"}`, `{"queries": [1]}`, `{"queries": ["a"], "x": 1}`},
		},
		{
			name:    "list_tools",
			valid:   []string{`{}`},
			invalid: []string{`{"all": true}`},
		},
		{
			name:    "get_tool_schema",
			valid:   []string{`{"names": ["calculator"]}`},
			invalid: []string{`{}`, `{"names": []}`, `{"names": "calculator"}`, `{"names": ["a"], "x": 1}`},
		},
	}
	require.Len(t, catalog.Definitions, len(tests))
	for i, tt := range tests {
		d := catalog.Definitions[i]
		require.Equal(t, tt.name, d.Name)
		require.Equal(t, catalog.Family, d.Family)
		require.Equal(t, tools.OfferAllowlisted, d.Offered)
		require.Equal(t, tools.EffectRead, d.Effect)
		require.Equal(t, tools.PreviewExempt, d.Preview, "catalogue results bypass previews")
		require.LessOrEqual(t, utf8.RuneCountInString(d.Description), catalog.MaxDescription)
		require.Contains(t, d.Operation, d.Field+"(conversationId: $conversationId")

		s := tooltest.Schema(t, d.Schema)
		for _, give := range tt.valid {
			require.True(t, tooltest.Valid(t, s, give), give)
		}
		for _, give := range tt.invalid {
			require.False(t, tooltest.Valid(t, s, give), give)
		}
	}
}
