package db

import (
	"context"
	"fmt"
	"time"

	"entgo.io/ent/schema/field"

	"github.com/toolgate/toolgate/ent/migrate"
)

// rewriteDebugTimes rewrites, in SQLite's own format and in UTC, every time
// that an earlier version stored as Go's debug string
// ("2026-11-30 17:58:13.51847883 +0000 UTC m=+51.11…"). Those strings do
// not sort as the times they hold, so ordering and paging by them go wrong.
// Rows already in the new format are not matched: running it again changes
// nothing. It scans every time column, so it runs once per database file:
// PRAGMA user_version records that it ran (nothing else sets it).
func (d *DB) rewriteDebugTimes(ctx context.Context) error {
	var version int
	if err := d.SQL.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version >= timesRewritten {
		return nil
	}
	for _, t := range migrate.Tables {
		if len(t.PrimaryKey) != 1 {
			continue
		}
		id := t.PrimaryKey[0].Name
		for _, c := range t.Columns {
			if c.Type != field.TypeTime {
				continue
			}
			if err := d.rewriteColumn(ctx, t.Name, id, c.Name); err != nil {
				return fmt.Errorf("rewrite times of %s.%s: %w", t.Name, c.Name, err)
			}
		}
	}
	if _, err := d.SQL.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", timesRewritten)); err != nil {
		return fmt.Errorf("record times rewritten: %w", err)
	}
	return nil
}

// timesRewritten is the user_version from which times are in SQLite's format.
const timesRewritten = 1

func (d *DB) rewriteColumn(ctx context.Context, table, id, col string) error {
	// The debug string has a space before its zone offset ("… +0000 UTC");
	// SQLite's format has none ("…+00:00").
	q := fmt.Sprintf("SELECT %q, %q FROM %q WHERE %q LIKE '%% +____ %%' OR %q LIKE '%% -____ %%'",
		id, col, table, col, col)
	rows, err := d.SQL.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	type row struct {
		id int64
		at time.Time
	}
	var old []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.at); err != nil {
			_ = rows.Close()
			return err
		}
		old = append(old, r)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(old) == 0 {
		return nil
	}
	tx, err := d.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	u := fmt.Sprintf("UPDATE %q SET %q = ? WHERE %q = ?", table, col, id)
	for _, r := range old {
		if _, err := tx.ExecContext(ctx, u, r.at.UTC(), r.id); err != nil {
			return err
		}
	}
	return tx.Commit()
}
