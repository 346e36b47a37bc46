// Package hybrid is toolgate's passage search: full-text search fused with
// vector similarity by reciprocal rank fusion, on SQLite and PostgreSQL
// alike. Every search family (documents, attachments, memories, past
// conversations) keeps its passages here under its own index name.
//
// The passages live in side tables that Migrate creates beside ent's (ent
// knows nothing of full-text search):
//
//   - hybrid_entries: one row per passage (index, id, scope, text, vector);
//   - on SQLite, hybrid_fts: an FTS5 table (porter stemming, unicode61) over
//     the text, keyed by the entry's rowid;
//   - on PostgreSQL, a stored tsvector column ('english' configuration) with
//     a GIN index.
//
// Vectors are stored as blobs of little-endian float32s, compared by dot
// product in Go (callers store normalised vectors, so it is the cosine), and
// cached per scope between writes. pgvector is not required: Migrate notes
// whether the extension is installed (Store.PGVector), and search works the
// same without it.
//
// Scopes are opaque strings the caller chooses ("kb:12", "conversation:7",
// "user:3"); a query names the scopes it may reach and sees nothing else.
// The caller checks that the scopes are the viewer's: this package trusts
// them.
package hybrid

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"entgo.io/ent/dialect"
	"github.com/lib/pq"
)

// Table is the side table that holds every index's passages.
const Table = "hybrid_entries"

// IndexTurns is the index of people's messages (past-conversation search):
// one passage per turn, under the turn's id, so a conversation's deletion
// removes its turns' passages by id.
const IndexTurns = "turns"

// RRFK is the k of reciprocal rank fusion: a passage scores 1/(k+rank) in
// each list it appears in. 60 is the value of the original paper.
const RRFK = 60

// Entry is one passage to index.
type Entry struct {
	// ID is the caller's id of the passage (a chunk's, a memory's); unique
	// within the index.
	ID int64
	// Scope is who may find it.
	Scope string
	// Text is what full-text search matches.
	Text string
	// Vector is the passage's normalised embedding; nil indexes the text only.
	Vector []float32
}

// Query is one search.
type Query struct {
	// Scopes the search may reach; none finds nothing.
	Scopes []string
	// Text is matched word by word (any word; stemmed).
	Text string
	// Vector is the query's normalised embedding; nil searches text only.
	Vector []float32
	// MinSimilarity is the cosine below which a vector neighbour is not a
	// hit: without it every search would "find" the nearest passages,
	// however unrelated.
	MinSimilarity float32
	// Limit is the most hits returned; 0 means 10.
	Limit int
}

// Hit is one passage found, best first.
type Hit struct {
	ID int64
	// Score is the fused score: the sum of 1/(RRFK+rank) over the lists
	// (text, vector) the passage was found in.
	Score float64
	// TextRank and VectorRank are the passage's 1-based ranks in each list;
	// 0 where it was not in that list.
	TextRank, VectorRank int
	// Similarity is the cosine to the query vector, when there was one.
	Similarity float32
}

// Store is one named index over a database. It is safe for concurrent use.
type Store struct {
	db      *sql.DB
	dialect string
	index   string
	cache   *vectorCache
}

// New returns the index named index over db, whose dialect is
// dialect.SQLite or dialect.Postgres. Migrate must have run.
func New(db *sql.DB, dialectName, index string) *Store {
	return &Store{db: db, dialect: dialectName, index: index, cache: newVectorCache()}
}

// Migrate creates the side tables if they are missing. It is safe to run
// again.
func Migrate(ctx context.Context, db *sql.DB, dialectName string) error {
	var stmts []string
	switch dialectName {
	case dialect.SQLite:
		stmts = []string{
			`CREATE TABLE IF NOT EXISTS hybrid_entries (
				rid INTEGER PRIMARY KEY AUTOINCREMENT,
				idx TEXT NOT NULL, id INTEGER NOT NULL, scope TEXT NOT NULL,
				text TEXT NOT NULL, vector BLOB,
				UNIQUE (idx, id))`,
			// rid in the index: the vector cache's check (count and sum of
			// rids of a scope) reads the index alone.
			`DROP INDEX IF EXISTS hybrid_entries_scope`,
			`CREATE INDEX IF NOT EXISTS hybrid_entries_scope_rid ON hybrid_entries (idx, scope, rid)`,
			`CREATE VIRTUAL TABLE IF NOT EXISTS hybrid_fts USING fts5(
				text, content='hybrid_entries', content_rowid='rid',
				tokenize='porter unicode61 remove_diacritics 2')`,
			`CREATE TRIGGER IF NOT EXISTS hybrid_entries_ai AFTER INSERT ON hybrid_entries BEGIN
				INSERT INTO hybrid_fts (rowid, text) VALUES (new.rid, new.text); END`,
			`CREATE TRIGGER IF NOT EXISTS hybrid_entries_ad AFTER DELETE ON hybrid_entries BEGIN
				INSERT INTO hybrid_fts (hybrid_fts, rowid, text) VALUES ('delete', old.rid, old.text); END`,
		}
	case dialect.Postgres:
		stmts = []string{
			`CREATE TABLE IF NOT EXISTS hybrid_entries (
				rid BIGSERIAL PRIMARY KEY,
				idx TEXT NOT NULL, id BIGINT NOT NULL, scope TEXT NOT NULL,
				text TEXT NOT NULL, vector BYTEA,
				tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
				UNIQUE (idx, id))`,
			`DROP INDEX IF EXISTS hybrid_entries_scope`,
			`CREATE INDEX IF NOT EXISTS hybrid_entries_scope_rid ON hybrid_entries (idx, scope, rid)`,
			`CREATE INDEX IF NOT EXISTS hybrid_entries_tsv ON hybrid_entries USING GIN (tsv)`,
		}
	default:
		return fmt.Errorf("hybrid search: dialect %q: want sqlite3 or postgres", dialectName)
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("migrate search tables: %w", err)
		}
	}
	return nil
}

// PGVector reports whether the database has the pgvector extension
// installed. Search does not need it; it is reported so an operator knows
// whether an approximate index could be added.
func PGVector(ctx context.Context, db *sql.DB, dialectName string) (bool, error) {
	if dialectName != dialect.Postgres {
		return false, nil
	}
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_extension WHERE extname = 'vector'`).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look for pgvector: %w", err)
	}
	return n > 0, nil
}

// putBatch is how many passages one statement of Put writes.
const putBatch = 100

// Put indexes entries, replacing any of the same ids, in one transaction.
func (s *Store) Put(ctx context.Context, entries ...Entry) error {
	if len(entries) == 0 {
		return nil
	}
	// An id given twice keeps its last entry, as one put after another would.
	last := make(map[int64]int, len(entries))
	for i, e := range entries {
		last[e.ID] = i
	}
	if len(last) < len(entries) {
		kept := make([]Entry, 0, len(last))
		for i, e := range entries {
			if last[e.ID] == i {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("index passages: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// Delete then insert, never update: a new rid is how the vector cache
	// learns that a scope changed. Many rows a statement: each statement
	// is a savepoint at which FTS5 flushes what it indexed.
	for start := 0; start < len(entries); start += putBatch {
		batch := entries[start:min(start+putBatch, len(entries))]
		ids := make([]any, 0, len(batch)+1)
		ids = append(ids, s.index)
		vals := make([]any, 0, 5*len(batch))
		for _, e := range batch {
			if e.Scope == "" {
				return errors.New("index passage: empty scope")
			}
			var vec []byte
			if e.Vector != nil {
				vec = marshal(e.Vector)
			}
			ids = append(ids, e.ID)
			vals = append(vals, s.index, e.ID, e.Scope, words(e.Text), vec)
		}
		del := s.rebind(`DELETE FROM hybrid_entries WHERE idx = ? AND id IN (` + placeholders(len(batch)) + `)`)
		if _, err := tx.ExecContext(ctx, del, ids...); err != nil {
			return fmt.Errorf("index passages: %w", err)
		}
		ins := s.rebind(`INSERT INTO hybrid_entries (idx, id, scope, text, vector) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?),", len(batch)), ","))
		if _, err := tx.ExecContext(ctx, ins, vals...); err != nil {
			return fmt.Errorf("index passages: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("index passages: %w", err)
	}
	return nil
}

// DeleteScope removes every passage of scope from the index.
func (s *Store) DeleteScope(ctx context.Context, scope string) error {
	_, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM hybrid_entries WHERE idx = ? AND scope = ?`), s.index, scope)
	if err != nil {
		return fmt.Errorf("remove passages of %s: %w", scope, err)
	}
	return nil
}

// Delete removes the passages of ids from the index.
func (s *Store) Delete(ctx context.Context, ids ...int64) error {
	for _, id := range ids {
		_, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM hybrid_entries WHERE idx = ? AND id = ?`), s.index, id)
		if err != nil {
			return fmt.Errorf("remove passage %d: %w", id, err)
		}
	}
	return nil
}

// candidates is how many passages each list contributes to the fusion.
func candidates(limit int) int { return max(4*limit, 50) }

// Search runs q: the full-text list and the vector list, fused. A query
// whose words match nothing and whose vector is near nothing returns no
// hits and no error.
func (s *Store) Search(ctx context.Context, q Query) ([]Hit, error) {
	if q.Limit <= 0 {
		q.Limit = 10
	}
	scopes := slices.Compact(slices.Sorted(slices.Values(q.Scopes)))
	if len(scopes) == 0 {
		return nil, nil
	}
	n := candidates(q.Limit)
	text, err := s.textList(ctx, scopes, q.Text, n)
	if err != nil {
		return nil, err
	}
	var near []scored
	if q.Vector != nil {
		if near, err = s.vectorList(ctx, scopes, q.Vector, q.MinSimilarity, n); err != nil {
			return nil, err
		}
	}
	return fuse(text, near, q.Limit), nil
}

// scored is one passage of one list.
type scored struct {
	id  int64
	sim float32
}

// fuse merges the text and vector lists by reciprocal rank fusion.
func fuse(text []int64, near []scored, limit int) []Hit {
	byID := map[int64]*Hit{}
	get := func(id int64) *Hit {
		h, ok := byID[id]
		if !ok {
			h = &Hit{ID: id}
			byID[id] = h
		}
		return h
	}
	for i, id := range text {
		h := get(id)
		h.TextRank = i + 1
		h.Score += 1 / float64(RRFK+i+1)
	}
	for i, c := range near {
		h := get(c.id)
		h.VectorRank = i + 1
		h.Similarity = c.sim
		h.Score += 1 / float64(RRFK+i+1)
	}
	out := make([]Hit, 0, len(byID))
	for _, h := range byID {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// maxTerms bounds the words of a full-text query.
const maxTerms = 32

// Terms returns the distinct lowercased words of text, as full-text search
// matches them (letters and digits; at most 32).
func Terms(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if seen[w] || len(w) > 64 {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == maxTerms {
			break
		}
	}
	return out
}

// MaxTextCandidates bounds the passages one full-text pass ranks on
// PostgreSQL: a common word matches thousands, and ranking them all would
// cost each search in proportion to the corpus.
const MaxTextCandidates = 500

// textList returns the best n passages by full-text rank: those holding
// every word first, then those holding any, each pass bounded.
func (s *Store) textList(ctx context.Context, scopes []string, text string, n int) ([]int64, error) {
	terms := Terms(text)
	if len(terms) == 0 {
		return nil, nil
	}
	var ids []int64
	if len(terms) > 1 {
		all, err := s.textPass(ctx, scopes, terms, true, n)
		if err != nil {
			return nil, err
		}
		ids = all
	}
	if len(ids) >= n {
		return ids, nil
	}
	some, err := s.textPass(ctx, scopes, terms, false, n)
	if err != nil {
		return nil, err
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	for _, id := range some {
		if len(ids) == n {
			break
		}
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// textPass ranks the passages holding every term (all) or any.
func (s *Store) textPass(ctx context.Context, scopes, terms []string, all bool, n int) ([]int64, error) {
	var (
		query string
		args  []any
	)
	switch s.dialect {
	case dialect.Postgres:
		op := " | "
		if all {
			op = " & "
		}
		query = `SELECT id FROM (
				SELECT id, tsv FROM hybrid_entries
				WHERE idx = $2 AND scope = ANY($3) AND tsv @@ to_tsquery('english', $1) LIMIT $5) c
			ORDER BY ts_rank_cd(c.tsv, to_tsquery('english', $1)) DESC, id LIMIT $4`
		args = []any{strings.Join(terms, op), s.index, pq.Array(scopes), n, MaxTextCandidates}
	default:
		quoted := make([]string, len(terms))
		for i, t := range terms {
			quoted[i] = `"` + t + `"`
		}
		op := " OR "
		if all {
			op = " AND "
		}
		query = `SELECT e.id FROM hybrid_fts JOIN hybrid_entries e ON e.rid = hybrid_fts.rowid
			WHERE hybrid_fts MATCH ? AND e.idx = ? AND e.scope IN (` + placeholders(len(scopes)) + `)
			ORDER BY bm25(hybrid_fts), e.id LIMIT ?`
		args = []any{strings.Join(quoted, op), s.index}
		for _, sc := range scopes {
			args = append(args, sc)
		}
		args = append(args, n)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("full-text search: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("full-text search: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("full-text search: %w", err)
	}
	return ids, nil
}

func (s *Store) vectorList(ctx context.Context, scopes []string, v []float32, floor float32, n int) ([]scored, error) {
	var all []scored
	for _, sc := range scopes {
		vecs, err := s.vectors(ctx, sc)
		if err != nil {
			return nil, err
		}
		for _, e := range vecs.entries {
			if sim := dot(v, e.v); sim >= floor && sim > 0 {
				all = append(all, scored{e.id, sim})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].sim != all[j].sim {
			return all[i].sim > all[j].sim
		}
		return all[i].id < all[j].id
	})
	if len(all) > n {
		all = all[:n]
	}
	return all, nil
}

// vectors returns the vectors of one scope, from the cache while the scope
// has not changed: a cheap count and sum of row ids tells (rows are only
// ever inserted with a new, larger rid, or deleted).
func (s *Store) vectors(ctx context.Context, scope string) (*scopeVectors, error) {
	var count, sum int64
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT count(*), coalesce(sum(rid), 0) FROM hybrid_entries WHERE idx = ? AND scope = ?`),
		s.index, scope).Scan(&count, &sum)
	if err != nil {
		return nil, fmt.Errorf("vector search: %w", err)
	}
	key := s.index + "\x00" + scope
	if c := s.cache.get(key); c != nil && c.count == count && c.sum == sum {
		return c, nil
	}
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT id, vector FROM hybrid_entries WHERE idx = ? AND scope = ? AND vector IS NOT NULL`),
		s.index, scope)
	if err != nil {
		return nil, fmt.Errorf("vector search: %w", err)
	}
	defer rows.Close()
	out := &scopeVectors{}
	var total int64
	for rows.Next() {
		var (
			id   int64
			blob []byte
		)
		if err := rows.Scan(&id, &blob); err != nil {
			return nil, fmt.Errorf("vector search: %w", err)
		}
		v, err := unmarshal(blob)
		if err != nil {
			return nil, fmt.Errorf("vector search: passage %d: %w", id, err)
		}
		out.entries = append(out.entries, vecEntry{id, v})
		out.bytes += int64(len(blob))
		total++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("vector search: %w", err)
	}
	// Rows without vectors count too: the check above counts every row.
	out.count, out.sum = count, sum
	if total > 0 || count == 0 {
		s.cache.put(key, out)
	}
	return out, nil
}

func (s *Store) rebind(q string) string {
	if s.dialect != dialect.Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

func dot(a, b []float32) float32 {
	if len(a) != len(b) {
		return 0
	}
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func marshal(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func unmarshal(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("decode vector: %d bytes is not a whole number of float32s", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

type vecEntry struct {
	id int64
	v  []float32
}

type scopeVectors struct {
	count, sum int64
	bytes      int64
	entries    []vecEntry
}

// maxCacheBytes bounds the vectors kept in memory per Store; past it the
// cache starts again empty.
const maxCacheBytes = 256 << 20

type vectorCache struct {
	mu     sync.Mutex
	bytes  int64
	scopes map[string]*scopeVectors
}

func newVectorCache() *vectorCache { return &vectorCache{scopes: map[string]*scopeVectors{}} }

func (c *vectorCache) get(key string) *scopeVectors {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scopes[key]
}

func (c *vectorCache) put(key string, v *scopeVectors) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.scopes[key]; ok {
		c.bytes -= old.bytes
	}
	if c.bytes+v.bytes > maxCacheBytes {
		c.scopes = map[string]*scopeVectors{}
		c.bytes = 0
	}
	c.scopes[key] = v
	c.bytes += v.bytes
}

// Fill indexes, text only, the rows that sel returns (columns id, scope,
// text, in that order) and the index lacks, in one statement. Rows already
// indexed are left as they are, so it is safe to run again and from
// several callers at once: a family whose passages are rows of its own
// (past conversations' user messages) fills the index just before it
// searches, and never misses a row written since.
func (s *Store) Fill(ctx context.Context, sel string, args ...any) (int64, error) {
	q := `INSERT INTO ` + Table + ` (idx, id, scope, text)
		SELECT ?, src.id, src.scope, src.text FROM (` + sel + `) src
		WHERE NOT EXISTS (SELECT 1 FROM ` + Table + ` h WHERE h.idx = ? AND h.id = src.id)
		ON CONFLICT (idx, id) DO NOTHING`
	all := append(append([]any{s.index}, args...), s.index)
	res, err := s.db.ExecContext(ctx, s.rebind(q), all...)
	if err != nil {
		return 0, fmt.Errorf("fill the %s index: %w", s.index, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// words is text as full-text search reads it: a NUL or a byte that is not
// UTF-8 separates words (PostgreSQL's text could not hold them, and
// neither is part of a word).
func words(text string) string {
	if strings.IndexByte(text, 0) < 0 && utf8.ValidString(text) {
		return text
	}
	return strings.ReplaceAll(strings.ToValidUTF8(text, " "), "\x00", " ")
}
