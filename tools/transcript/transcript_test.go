package transcript

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/tooltest"
)

func TestDefinition(t *testing.T) {
	t.Parallel()
	d := Definition
	require.Equal(t, "read_transcript", d.Name)
	require.Equal(t, tools.OfferAlways, d.Offered)
	require.Equal(t, tools.EffectRead, d.Effect)
	require.LessOrEqual(t, len(d.Description), 600, "every turn pays for it")
	require.Contains(t, d.Operation, d.Field+"(")

	schema := tooltest.Schema(t, d.Schema)
	tests := []struct {
		give string
		want bool
	}{
		{give: `{}`, want: true},
		{give: `{"fromTurn": 2, "toTurn": 5, "offset": 3, "maxChars": 20000}`, want: true},
		{give: `{"words": "budget report"}`, want: true},
		{give: `{"maxChars": 20001}`, want: false},
		{give: `{"fromTurn": 0}`, want: false},
		{give: `{"turns": [1]}`, want: false},
	}
	for _, tt := range tests {
		var v any
		require.NoError(t, json.Unmarshal([]byte(tt.give), &v))
		require.Equal(t, tt.want, schema.Validate(v) == nil, tt.give)
	}
}

func TestMinTurnChars(t *testing.T) {
	t.Parallel()
	// The smallest turn there can be: it bounds the rows a read loads.
	s := renderTurn(Turn{Number: 1, StartedAt: time.Unix(0, 0)}, time.UTC)
	require.GreaterOrEqual(t, utf8.RuneCountInString(s), minTurnChars, s)
}

func TestHead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give    string
		n       int
		want    string
		wantCut bool
	}{
		{give: "", n: 3, want: ""},
		{give: "abc", n: 3, want: "abc"},
		{give: "abcd", n: 3, want: "abc", wantCut: true},
		{give: "ééééé", n: 4, want: "éééé", wantCut: true},
	}
	for _, tt := range tests {
		got, cut := head(tt.give, tt.n)
		require.Equal(t, tt.want, got, tt.give)
		require.Equal(t, tt.wantCut, cut, tt.give)
	}
}

func TestLikePattern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want string
	}{
		{give: "Budget", want: "%budget%"},
		{give: "Büro", want: "%b_ro%"},
		{give: "50%_a\\b", want: `%50\%\_a\\b%`},
		{give: "KASKO", want: "%_a__o%"},            // k and s fold with the Kelvin sign and long s
		{give: "a\x00b\uE000c", want: "%a\x00b%c%"}, // the escape is two characters on PostgreSQL
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, likePattern(tt.give), tt.give)
	}
}

// TestWordsOnEachBackend checks that the database's narrowing never drops
// a turn the exact match accepts, whatever LOWER does on the backend.
func TestWordsOnEachBackend(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		convID := dbtest.Seed(t, c).Conversation
		texts := []string{"Ärger im Büro", "ΣΊΣΥΦΟΣ rolls", "3\u212a cold", "ſtop", "Kiosk", "50% off_peak"}
		for i, s := range texts {
			c.Turn.Create().SetConversationID(convID).SetNumber(i + 1).SetUserText("q").SetAnswer(s).SaveX(ctx)
		}
		tests := []struct {
			give string
			want []int
		}{
			{give: "ärger BÜRO", want: []int{1}},
			{give: "σίσυφος", want: []int{2}},
			{give: "3k", want: []int{3}},
			{give: "STOP", want: []int{4}},
			{give: "kiosk", want: []int{5}},
			{give: "k", want: []int{3, 5, 6}},
			{give: "50%", want: []int{6}},
			{give: "f_p", want: []int{6}},
			{give: "0_o", want: []int{}},
		}
		for _, tt := range tests {
			p, err := Read(ctx, c, Query{ConversationID: convID, Words: &tt.give})
			require.NoError(t, err)
			got := []int{}
			for _, tu := range p.Turns {
				got = append(got, tu.Number)
			}
			require.Equal(t, tt.want, got, tt.give)
		}
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	n := func(v int) *int { return &v }
	s := func(v string) *string { return &v }
	valid := []Query{
		{},
		{FromTurn: n(3), ToTurn: n(3), Offset: n(0), MaxChars: n(1)},
		{MaxChars: n(MaxChars), Words: s(strings.Repeat("w ", MaxWords))},
	}
	for _, q := range valid {
		require.NoError(t, q.Validate())
	}
	tests := []struct {
		give Query
		want string
	}{
		{give: Query{FromTurn: n(4), ToTurn: n(3)}, want: "fromTurn 4 is after toTurn 3"},
		{give: Query{MaxChars: n(MaxChars + 1)}, want: "maxChars must be between 1 and 20000"},
		{give: Query{Words: s(strings.Repeat("w ", MaxWords+1))}, want: "words: at most 10 words, got 11"},
	}
	for _, tt := range tests {
		require.EqualError(t, tt.give.Validate(), tt.want)
	}
}
