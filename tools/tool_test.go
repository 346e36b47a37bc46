package tools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsAbsent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want bool
	}{
		{give: `null`, want: true},
		{give: `""`, want: true},
		{give: `[]`, want: true},
		{give: `{}`, want: true},
		{give: `{"hits": [], "total": 0}`, want: true},
		{give: `{"hits": [], "failures": [{"item": 0, "message": "x"}]}`, want: true},
		{give: `{"hits": [{"a": 1}]}`, want: false},
		{give: `{"value": "0.5"}`, want: false},
		{give: `0`, want: false},
		{give: `false`, want: false},
		{give: `"text"`, want: false},
		{give: `not json`, want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, IsAbsent(json.RawMessage(tt.give)), tt.give)
	}
}

func TestSearchLimitsCheck(t *testing.T) {
	t.Parallel()
	l := SearchLimits{Queries: 2, QueryChars: 5, MaxResults: 3}
	three := 3
	require.NoError(t, l.Check([]string{"tide", "moon"}, &three))
	for name, q := range map[string][]string{
		"none": {}, "too many": {"a", "b", "c"}, "empty": {" "}, "too long": {"tides!"}, "repeated": {"Tide", " tide "},
	} {
		var r *Refusal
		require.ErrorAs(t, l.Check(q, nil), &r, name)
	}
	four := 4
	require.ErrorContains(t, l.Check([]string{"tide"}, &four), "maxResults must be between 1 and 3")
}

// TestAttempts: a call's record keeps the most attempts any of its
// requests took; without a record nothing is kept, and Try with no retry
// loop sends once.
func TestAttempts(t *testing.T) {
	t.Parallel()
	Attempted(context.Background(), 3) // no record: nothing to do
	ctx, a := WithAttempts(context.Background())
	require.Zero(t, a.N())
	Attempted(ctx, 2)
	Attempted(ctx, 4)
	Attempted(ctx, 1)
	require.Equal(t, 4, a.N())

	ctx, a = WithAttempts(context.Background())
	tries := 0
	err := Try(ctx, nil, func(context.Context) error { tries++; return errors.New("down") })
	require.EqualError(t, err, "down")
	require.Equal(t, 1, tries)
	require.Equal(t, 1, a.N())
}

func TestGrounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give Definition
		want Evidence
	}{
		{name: "a read", give: Definition{Effect: EffectRead, Preview: PreviewLarge}, want: EvidenceShown},
		{name: "a listing", give: Definition{Effect: EffectRead, Preview: PreviewLarge, Evidence: EvidenceNone}, want: EvidenceNone},
		{name: "a window read", give: Definition{Effect: EffectRead, Preview: PreviewExempt, Evidence: EvidenceWindows}, want: EvidenceWindows},
		{name: "a receipt", give: Definition{Effect: EffectWrite, Preview: PreviewExempt}, want: EvidenceNone},
		{name: "instructions", give: Definition{Effect: EffectRead, Preview: PreviewExempt, Instructs: true, Evidence: EvidenceWindows}, want: EvidenceNone},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.give.Grounds(), tt.name)
	}
}
