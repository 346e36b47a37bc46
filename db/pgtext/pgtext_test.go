package pgtext_test

import (
	"testing"
	"unicode/utf8"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/pgtext"
)

// What PostgreSQL's text cannot hold is escaped into what it can, and
// reads back as it was; a string read on SQLite is never touched.
func TestEscapeReadsBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give       string
		wantEscape bool
	}{
		{give: "plain", wantEscape: false},
		{give: "a\x00b", wantEscape: true},
		{give: "bad \xff byte", wantEscape: true},
		{give: "esc \uE000 itself", wantEscape: true},
		{give: "\uE0000 looks escaped", wantEscape: true},
	}
	for _, tt := range tests {
		require.Equal(t, tt.wantEscape, pgtext.NeedsEscape(tt.give), "%q", tt.give)
		stored := pgtext.Escape(tt.give)
		require.True(t, utf8.ValidString(stored), "%q", stored)
		require.NotContains(t, stored, "\x00")
		require.Equal(t, tt.give, pgtext.Read(dialect.Postgres, stored), "%q", tt.give)
		require.Equal(t, stored, pgtext.Read(dialect.SQLite, stored), "%q", tt.give)
	}
}
