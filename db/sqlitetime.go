package db

// SQLiteTime is the layout the SQLite driver writes times in (always in
// UTC here): code that reads a time column as text, to scan it alongside
// other columns, parses it with this one layout.
const SQLiteTime = "2006-01-02 15:04:05.999999999-07:00"
