package result

import (
	"bytes"
	"context"
	"fmt"
	"unicode"
	"unicode/utf8"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
)

// Reads of large stored results fetch only what the window needs: a
// result of more than wholeBytes is described from its columns and its
// first headBytes, and its window read with substr, in chunks of
// chunkBytes while characters must be counted. On PostgreSQL the content
// is stored uncompressed (db), so a substr reads only the pages it
// covers. Searches read the whole content: every match is counted.
const (
	wholeBytes = 256 << 10
	headBytes  = 4 << 10
	chunkBytes = 1 << 20
)

// stored is what a read needs of one stored result before its window.
type stored struct {
	ID                int    `sql:"id"`
	Ref               string `sql:"ref"`
	Kind              string `sql:"kind"`
	Chars             int64  `sql:"chars"`
	Bytes             int64  `sql:"bytes"`
	TruncatedAtSource bool   `sql:"truncated_at_source"`
	// Whole is the content of a result of at most wholeBytes, else nil.
	Whole []byte `sql:"whole"`
	// Head is the content's first headBytes.
	Head []byte `sql:"head"`
	// sqlite: its substr loads the whole value before it cuts, so a
	// window that must count characters is read from the whole content.
	sqlite bool
}

// large reports whether the result's window is to be read in pieces: it
// was too large to load whole, and its counts could be those of its
// content (a result whose counts could not be is read whole).
func (s *stored) large() bool {
	return s.Whole == nil && s.Chars > 0 && s.Chars <= s.Bytes && s.Bytes <= 4*s.Chars &&
		(s.Chars == s.Bytes || !s.sqlite)
}

// limits are wholeBytes and chunkBytes, or what a test set.
func (r *Reader) limits() (whole, chunk int) {
	whole, chunk = wholeBytes, chunkBytes
	if r.whole > 0 {
		whole = r.whole
	}
	if r.chunk > 0 {
		chunk = r.chunk
	}
	return whole, chunk
}

// loadStored loads the refs' columns, with the content of those small
// enough to read whole and the head of the others, in one query.
func (r *Reader) loadStored(ctx context.Context, refs []string) (map[string]*stored, error) {
	q := r.client.StoredResult.Query().Where(storedresult.RefIn(refs...))
	if r.conv != 0 {
		q.Where(storedresult.ConversationID(r.conv))
	}
	whole, _ := r.limits()
	var rows []*stored
	var sqlite bool
	err := q.Select(storedresult.FieldID, storedresult.FieldRef, storedresult.FieldKind, storedresult.FieldChars,
		storedresult.FieldBytes, storedresult.FieldTruncatedAtSource).
		Aggregate(func(s *entsql.Selector) string {
			c := s.C(storedresult.FieldContent)
			cond := fmt.Sprintf("length(%s) <= %d", c, whole)
			if s.Dialect() == dialect.SQLite {
				// Read whole anyway (see sqlite): in this query, not a second.
				cond += fmt.Sprintf(" OR %s <> %s", s.C(storedresult.FieldChars), s.C(storedresult.FieldBytes))
			}
			return fmt.Sprintf("CASE WHEN %s THEN %s END AS whole", cond, c)
		}, func(s *entsql.Selector) string {
			sqlite = s.Dialect() == dialect.SQLite
			return fmt.Sprintf("substr(%s, 1, %d) AS head", s.C(storedresult.FieldContent), headBytes)
		}).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("load stored results: %w", err)
	}
	out := make(map[string]*stored, len(rows))
	for _, row := range rows {
		if (row.Bytes <= int64(whole) || sqlite && row.Chars != row.Bytes) && row.Whole == nil {
			row.Whole = []byte{} // an empty blob may scan as NULL
		}
		row.sqlite = sqlite
		out[row.Ref] = row
	}
	return out, nil
}

// loadContent reads a stored result's whole content.
func (r *Reader) loadContent(ctx context.Context, id int) ([]byte, error) {
	row, err := r.client.StoredResult.Query().Where(storedresult.ID(id)).Select(storedresult.FieldContent).Only(ctx)
	if err != nil {
		return nil, fmt.Errorf("load stored result: %w", err)
	}
	return row.Content, nil
}

// piece reads bytes [start, start+n) of a stored result's content.
func (r *Reader) piece(ctx context.Context, id, start, n int) ([]byte, error) {
	var rows []struct {
		Part []byte `sql:"part"`
	}
	err := r.client.StoredResult.Query().Where(storedresult.ID(id)).
		Aggregate(func(s *entsql.Selector) string {
			return fmt.Sprintf("substr(%s, %d, %d) AS part", s.C(storedresult.FieldContent), start+1, n)
		}).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("read stored result: %w", err)
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("read stored result: %d rows", len(rows))
	}
	return rows[0].Part, nil
}

// headReadable reports, from the first bytes of a large content alone,
// that unreadable would find it readable; false when the head cannot
// tell (it is blank, or JSON's null and blanks, up to its last few bytes).
func headReadable(kind schematype.ResultKind, head []byte) bool {
	t := bytes.TrimLeftFunc(head, unicode.IsSpace)
	if kind == schematype.KindJSON && bytes.HasPrefix(t, []byte("null")) {
		t = bytes.TrimLeftFunc(t[4:], unicode.IsSpace)
	}
	// A character cut at the end of the head might be a space.
	return len(t) > utf8.UTFMax
}

// window reads the characters [offset, offset+n) of a large stored
// result of total characters, as Window would from the whole content,
// and the byte range they come from. When every character is one byte
// the range is read directly; otherwise the content is read in chunks
// from the start, counting characters the way Window does (an invalid
// byte is one), a character cut by a chunk's end carried to the next.
func (r *Reader) window(ctx context.Context, s *stored, offset, n int) (text string, start, end int, err error) {
	if s.Chars == s.Bytes {
		b, err := r.piece(ctx, s.ID, offset, n)
		if err != nil {
			return "", 0, 0, err
		}
		return sanitize(string(b)), offset, offset + len(b), nil
	}
	_, chunkSize := r.limits()
	var (
		out   []byte
		carry []byte
		pos   int // bytes of content read
		at    int // characters before buf
	)
	start = -1
	for pos < int(s.Bytes) {
		chunk, err := r.piece(ctx, s.ID, pos, chunkSize)
		if err != nil {
			return "", 0, 0, err
		}
		if len(chunk) == 0 {
			break
		}
		base := pos - len(carry) // content offset of buf[0]
		pos += len(chunk)
		buf := append(carry, chunk...)
		carry = nil
		if pos < int(s.Bytes) {
			cut := cutPoint(buf)
			carry = append([]byte(nil), buf[cut:]...)
			buf = buf[:cut]
		}
		// Chunks before the window are only counted.
		if n := utf8.RuneCount(buf); at+n <= offset {
			at += n
			continue
		}
		for i := 0; i < len(buf); {
			_, size := utf8.DecodeRune(buf[i:])
			if at == offset && start < 0 {
				start = base + i
			}
			if at >= offset+n {
				return sanitize(string(out)), start, base + i, nil
			}
			if at >= offset {
				out = append(out, buf[i:i+size]...)
			}
			at++
			i += size
		}
	}
	if start < 0 {
		start = pos
	}
	return sanitize(string(out)), start, pos, nil
}

// cutPoint is where buf may be cut without splitting a character that
// the bytes after would complete: before an incomplete UTF-8 sequence at
// its end, or at its end.
func cutPoint(buf []byte) int {
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				return i
			}
			break
		}
	}
	return len(buf)
}
