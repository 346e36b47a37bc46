// Package workspace holds the workspace tools: list_files, search_files,
// read_file, write_file, edit_file and delete_file. Every conversation has
// one workspace of files, kept in the database, so the six tools are
// offered on every turn. The tools write text; a binary file (the PDF
// print_pdf prints) is kept as its bytes with its media type, listed with
// it, and refused by the tools that read or edit text.
//
// A Workspace works on one conversation through the caller's ent client.
// Every query on files filters by that conversation; stored results, read
// for exports, are filtered by it too and go through the client's scope
// interceptors. Checks and limits are applied to a whole batch before
// anything is written, so a refused batch changes nothing.
package workspace

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/workspacefile"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/result"
)

// The workspace's limits. Sizes count UTF-8 bytes; MaxReplaceChars and
// MaxPathChars count characters.
const (
	// MaxPathChars bounds a normalised path.
	MaxPathChars = 255
	// MaxFileBytes bounds one text file.
	MaxFileBytes = 1 << 20
	// MaxBinaryBytes bounds one binary file.
	MaxBinaryBytes = 10 << 20
	// MaxWorkspaceBytes bounds all of a conversation's files together.
	MaxWorkspaceBytes = 20 << 20
	// MaxFiles bounds the number of files in a workspace.
	MaxFiles = 500
	// MaxBatchFiles is the most files one write_file call may write.
	MaxBatchFiles = 3
	// MaxReplaceChars bounds the content that may replace an existing file
	// whole; past it the model is pointed to edit_file, which costs it
	// only the changed text. Exports are not bound by it: their text is
	// never typed out by the model.
	MaxReplaceChars = 4000
	// MaxEdits is the most replacements one edit_file call may make.
	MaxEdits = 20
	// MaxSources is the most stored-result selections one exported file
	// may join.
	MaxSources = 10
	// MaxSearchStrings is the most strings one search_files call may look for.
	MaxSearchStrings = 5
	// MaxStringChars bounds each search string.
	MaxStringChars = 500
	// MaxContextLines is the most context lines search_files shows each
	// side of a matching line.
	MaxContextLines = 3
	// DefaultContextLines is the context when the call names none.
	DefaultContextLines = 1
	// MaxSearchChars bounds the excerpt text one search returns, within
	// what a preview would show; matches past it are counted, not shown.
	MaxSearchChars = 6000
	// MaxLineChars bounds each line shown in a search excerpt; a longer
	// line is cut around its first match.
	MaxLineChars = 400
)

// Refusal is a call the workspace will not carry out: a bad path, a
// limit, an export that cannot be made. Its message says what is wrong,
// with the limit, for the model to correct its call.
type Refusal = tools.Refusal

func refusef(format string, args ...any) error { return tools.Refusef(format, args...) }

// Workspace is one conversation's files.
type Workspace struct {
	client *ent.Client
	conv   int
}

// New returns the workspace of the conversation. The caller has checked
// that it may reach the conversation, and passes its scoped client: inside
// a mutation, the transaction's, so that a batch is all or nothing.
func New(client *ent.Client, conversationID int) *Workspace {
	return &Workspace{client: client, conv: conversationID}
}

// files starts every query on the workspace's files.
func (w *Workspace) files() *ent.WorkspaceFileQuery {
	return w.client.WorkspaceFile.Query().Where(workspacefile.ConversationID(w.conv))
}

// CleanPath returns the normal form of a workspace path: relative, cleaned
// of "." and ".." and repeated slashes, at most MaxPathChars characters. A
// path that is absolute, leaves the workspace, names the workspace itself,
// or holds control characters or backslashes is refused.
func CleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", refusef("path is empty: name a file, e.g. notes/plan.md")
	case !utf8.ValidString(p):
		return "", refusef("path %q is not valid UTF-8", p)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "", refusef("path %q has a control character", p)
	case strings.Contains(p, `\`):
		return "", refusef("path %q has a backslash: separate folders with /", p)
	case strings.HasPrefix(p, "/"):
		return "", refusef("path %q is absolute: give it relative to the workspace, e.g. %q", p, strings.TrimLeft(p, "/"))
	}
	c := path.Clean(p)
	switch {
	case c == ".":
		return "", refusef("path %q names the workspace itself, not a file", p)
	case c == ".." || strings.HasPrefix(c, "../"):
		return "", refusef("path %q leaves the workspace", p)
	case utf8.RuneCountInString(c) > MaxPathChars:
		return "", refusef("path is %d characters long: the limit is %d", utf8.RuneCountInString(c), MaxPathChars)
	}
	return c, nil
}

// FileInfo describes one file of a listing.
type FileInfo struct {
	Path  string `json:"path"`
	Chars int    `json:"chars"`
	Bytes int    `json:"bytes"`
	// MediaType is set on a binary file only.
	MediaType *string   `json:"mediaType,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Listing is what list_files answers: the files in path order. No files is
// an absence.
type Listing struct {
	Files []FileInfo `json:"files"`
}

// List returns the workspace's files, or those under folder when it is
// not empty (a file whose path is folder itself is listed too). An empty
// folder, ".", or "/" lists everything.
func (w *Workspace) List(ctx context.Context, folder *string) (*Listing, error) {
	q := w.files()
	if folder != nil && *folder != "" && *folder != "." && *folder != "/" {
		f, err := CleanPath(*folder)
		if err != nil {
			return nil, err
		}
		q.Where(workspacefile.Or(workspacefile.Path(f), workspacefile.PathHasPrefix(f+"/")))
	}
	rows, err := q.Select(workspacefile.FieldPath, workspacefile.FieldChars, workspacefile.FieldBytes,
		workspacefile.FieldMediaType, workspacefile.FieldUpdatedAt).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	out := &Listing{Files: make([]FileInfo, len(rows))}
	for i, r := range rows {
		out.Files[i] = FileInfo{Path: r.Path, Chars: int(r.Chars), Bytes: int(r.Bytes), UpdatedAt: r.UpdatedAt}
		if r.MediaType != "" {
			out.Files[i].MediaType = &r.MediaType
		}
	}
	// Sorted here, not in SQL: collations differ between databases.
	slices.SortFunc(out.Files, func(a, b FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Page is one window of a file, as read_file answers.
type Page struct {
	Path string `json:"path"`
	Text string `json:"text"`
	// Offset is where Text starts, in characters.
	Offset int `json:"offset"`
	// NextOffset is where the next window starts; nil when Text reaches
	// the end of the file.
	NextOffset *int `json:"nextOffset"`
	// TotalChars is the length of the whole file.
	TotalChars int `json:"totalChars"`
}

// Read returns maxChars characters of the file from offset, with the
// bounds of read_tool_result: maxChars defaults to result.DefaultMaxChars
// and lies between result.MinMaxChars and result.MaxMaxChars.
func (w *Workspace) Read(ctx context.Context, p string, offset, maxChars *int) (*Page, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	limit := result.DefaultMaxChars
	if maxChars != nil {
		if err := result.CheckMaxChars(*maxChars); err != nil {
			return nil, refusef("%v", err)
		}
		limit = *maxChars
	}
	from := 0
	if offset != nil {
		if *offset < 0 {
			return nil, refusef("offset %d is negative", *offset)
		}
		from = *offset
	}
	f, err := w.text(ctx, p)
	if err != nil {
		return nil, err
	}
	if from > 0 && from >= int(f.Chars) {
		return nil, refusef("offset %d is past the end of %q (%d characters)", from, p, f.Chars)
	}
	pg := result.Window(f.Content, from, limit)
	out := &Page{Path: p, Text: pg.Text, Offset: pg.Offset, TotalChars: pg.Total}
	if pg.NextOffset >= 0 {
		out.NextOffset = &pg.NextOffset
	}
	return out, nil
}

// get loads one file whole, or refuses when there is none.
func (w *Workspace) get(ctx context.Context, p string) (*ent.WorkspaceFile, error) {
	f, err := w.files().Where(workspacefile.Path(p)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, refusef("no file %q in the workspace", p)
	}
	if err != nil {
		return nil, fmt.Errorf("load file: %w", err)
	}
	return f, nil
}

// text loads one text file whole; a binary file is refused in words that
// say what it is.
func (w *Workspace) text(ctx context.Context, p string) (*ent.WorkspaceFile, error) {
	f, err := w.get(ctx, p)
	if err != nil {
		return nil, err
	}
	if f.MediaType != "" {
		return nil, refusef("%q is a binary file (%s, %d bytes): it cannot be read or edited as text", p, f.MediaType, f.Bytes)
	}
	return f, nil
}

// Binary reads one binary file: its bytes and media type. A text file is
// returned as its UTF-8 bytes, as text/plain.
func (w *Workspace) Binary(ctx context.Context, p string) ([]byte, string, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, "", err
	}
	f, err := w.get(ctx, p)
	if err != nil {
		return nil, "", err
	}
	if f.MediaType == "" {
		return []byte(f.Content), "text/plain; charset=utf-8", nil
	}
	return f.Data, f.MediaType, nil
}

// Deleted is what delete_file answers.
type Deleted struct {
	Path string `json:"path"`
}

// Delete removes one file.
func (w *Workspace) Delete(ctx context.Context, p string) (*Deleted, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	n, err := w.client.WorkspaceFile.Delete().
		Where(workspacefile.ConversationID(w.conv), workspacefile.Path(p)).
		Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("delete file: %w", err)
	}
	if n == 0 {
		return nil, refusef("no file %q in the workspace", p)
	}
	return &Deleted{Path: p}, nil
}

// checkText refuses content the workspace cannot hold whole: a NUL (text
// columns refuse it) or more than MaxFileBytes.
func checkText(content string) error {
	if strings.IndexByte(content, 0) >= 0 {
		return refusef("content has a NUL character: the workspace holds text only")
	}
	if len(content) > MaxFileBytes {
		return refusef("content is %d bytes: a file holds at most %d", len(content), MaxFileBytes)
	}
	return nil
}

// Text returns one file's whole text, for programs (run_code) that read
// files whole; the model reads windows with Read.
func (w *Workspace) Text(ctx context.Context, p string) (string, error) {
	p, err := CleanPath(p)
	if err != nil {
		return "", err
	}
	f, err := w.text(ctx, p)
	if err != nil {
		return "", err
	}
	return f.Content, nil
}
