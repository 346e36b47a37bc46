package schema

import "entgo.io/ent/dialect"

// jsonColumn stores a JSON field as PostgreSQL's json, not jsonb (ent's
// default there), on every JSON field. jsonb refuses the escape \u0000, so
// a NUL in a clarification, a failure's message or a repair made the
// whole write fail; json keeps the text exactly as written, \u0000
// included, and is read back byte for byte. Nothing queries inside these
// columns (no containment, no index on their content), which is all jsonb
// would buy. SQLite stores JSON as text either way.
var jsonColumn = map[string]string{dialect.Postgres: "json"}
