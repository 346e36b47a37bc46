package conn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadOnlyStatements(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{give: `SELECT "id" FROM "turns"`, want: true},
		{give: "  \n\tselect 1", want: true},
		{give: "-- a comment\nSELECT 1", want: true},
		{give: "/* hint */ SELECT 1", want: true},
		{give: "(SELECT 1) UNION (SELECT 2)", want: true},
		{give: "WITH t AS (SELECT 1) SELECT * FROM t", want: true},
		{give: "WITH t AS (SELECT 1) DELETE FROM turns WHERE id IN t", want: false},
		{give: `INSERT INTO "turns" ("x") VALUES (?) RETURNING "id"`, want: false},
		{give: `UPDATE river_job SET state = 'running' RETURNING *`, want: false},
		{give: "DELETE FROM turns", want: false},
		{give: "REPLACE INTO t VALUES (1)", want: false},
		{give: "PRAGMA user_version = 3", want: false},
		{give: "", want: false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, readOnly(tt.give), tt.give)
	}
}
