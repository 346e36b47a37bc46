// Package conn holds the layers between ent and the database drivers:
// on database/sql, each connection's statement cache (stmtcache.go),
// SQLite's write gate and deferred BEGIN (sqliteconn.go) and the observer
// tests count statements with (observe.go); over ent's driver, SQLite's
// read pool (readpool.go), PostgreSQL's text escaping (text.go) and the
// statements' spans (trace.go). Package db stacks them as it opens a
// database.
package conn
