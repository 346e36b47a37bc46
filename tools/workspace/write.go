package workspace

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent/workspacefile"
)

// FileInput is one file of a write_file batch: its path and either its
// content or, to export stored text, ToolResultContext.
type FileInput struct {
	Path    string  `json:"path"`
	Content *string `json:"content,omitempty"`
	// ToolResultContext selects the content from stored tool results; the
	// model sends it as _toolResultContext.
	ToolResultContext *ExportContext `json:"_toolResultContext,omitempty"`
}

// Written is one file a batch wrote.
type Written struct {
	Path  string `json:"path"`
	Chars int    `json:"chars"`
	Bytes int    `json:"bytes"`
	// Created is true for a new file, false for a replaced one.
	Created bool `json:"created"`
}

// WriteResult is what write_file answers, in the order of the batch.
type WriteResult struct {
	Files []Written `json:"files"`
}

// staged is a file of a batch, checked and ready to write.
type staged struct {
	path    string
	content string
	chars   int
}

// Write creates or replaces up to MaxBatchFiles files. Every file is
// checked, every export selected, and every limit applied before the first
// is written: a refused batch writes nothing. A refusal names the file (by
// its position and path) and, for exports, the source.
func (w *Workspace) Write(ctx context.Context, files []*FileInput) (*WriteResult, error) {
	if len(files) == 0 || len(files) > MaxBatchFiles {
		return nil, refusef("files: give 1 to %d files per call, not %d", MaxBatchFiles, len(files))
	}
	batch := make([]staged, len(files))
	for i, f := range files {
		s, err := w.stage(ctx, f)
		if err != nil {
			return nil, refusef("files[%d] %q: %v", i, f.Path, err)
		}
		for j := range i {
			if batch[j].path == s.path {
				return nil, refusef("files[%d] %q: the batch already writes %q", i, f.Path, s.path)
			}
		}
		batch[i] = s
	}
	idx, err := w.index(ctx)
	if err != nil {
		return nil, err
	}
	for i, s := range batch {
		if _, ok := idx.byPath[s.path]; ok && files[i].Content != nil && s.chars > MaxReplaceChars {
			return nil, refusef("files[%d] %q: the file exists and replacing it whole is limited to %d characters (this is %d): change it with edit_file",
				i, files[i].Path, MaxReplaceChars, s.chars)
		}
		if err := idx.checkFolders(s.path, batch[:i]); err != nil {
			return nil, refusef("files[%d] %q: %v", i, files[i].Path, err)
		}
	}
	changes := make([]change, len(batch))
	for i, s := range batch {
		changes[i] = change{path: s.path, bytes: len(s.content)}
	}
	if err := idx.checkTotals(changes); err != nil {
		return nil, err
	}
	return w.put(ctx, idx, batch)
}

// Content is a file's path and whole text, as a program writes it.
type Content struct {
	Path string
	Text string
}

// Commit writes the files a program produced (run_code), in order, all or
// nothing, under the limits of the workspace itself: each path, each
// file's size, files and folders, the totals. write_file's batch and
// replace limits do not apply: they spare the model typing, and a program
// types nothing. A later file of the same path replaces an earlier one.
func (w *Workspace) Commit(ctx context.Context, files []Content) (*WriteResult, error) {
	var batch []staged
	for _, f := range files {
		p, err := Check(f.Path, f.Text)
		if err != nil {
			return nil, err
		}
		s := staged{path: p, content: f.Text, chars: utf8.RuneCountInString(f.Text)}
		if i := slices.IndexFunc(batch, func(b staged) bool { return b.path == s.path }); i >= 0 {
			batch[i] = s
			continue
		}
		batch = append(batch, s)
	}
	idx, err := w.index(ctx)
	if err != nil {
		return nil, err
	}
	changes := make([]change, len(batch))
	for i, s := range batch {
		if err := idx.checkFolders(s.path, batch[:i]); err != nil {
			return nil, refusef("%q: %v", s.path, err)
		}
		changes[i] = change{path: s.path, bytes: len(s.content)}
	}
	if err := idx.checkTotals(changes); err != nil {
		return nil, err
	}
	return w.put(ctx, idx, batch)
}

// Check checks one file a program writes, as Commit will, and returns its
// normal path. A run checks each write as it happens, so the program hears
// of a bad one at once.
func Check(path, text string) (string, error) {
	p, err := CleanPath(path)
	if err != nil {
		return "", err
	}
	if err := checkText(text); err != nil {
		return "", refusef("%q: %v", p, err)
	}
	return p, nil
}

// put writes a checked batch.
func (w *Workspace) put(ctx context.Context, idx *index, batch []staged) (*WriteResult, error) {
	var err error
	out := &WriteResult{Files: make([]Written, len(batch))}
	for i, s := range batch {
		old, exists := idx.byPath[s.path]
		if exists {
			err = w.client.WorkspaceFile.UpdateOneID(old.id).
				SetContent(s.content).SetChars(int64(s.chars)).SetBytes(int64(len(s.content))).
				ClearMediaType().ClearData().
				Exec(ctx)
		} else {
			err = w.client.WorkspaceFile.Create().
				SetConversationID(w.conv).SetPath(s.path).
				SetContent(s.content).SetChars(int64(s.chars)).SetBytes(int64(len(s.content))).
				Exec(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("write file: %w", err)
		}
		out.Files[i] = Written{Path: s.path, Chars: s.chars, Bytes: len(s.content), Created: !exists}
	}
	return out, nil
}

// PutBinary creates or replaces one binary file (a PDF a tool printed),
// under the workspace's limits: the path, MaxBinaryBytes, files and
// folders, the totals.
func (w *Workspace) PutBinary(ctx context.Context, path, mediaType string, data []byte) (*Written, error) {
	p, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBinaryBytes {
		return nil, refusef("%q would be %d bytes: a binary file holds at most %d", p, len(data), MaxBinaryBytes)
	}
	idx, err := w.index(ctx)
	if err != nil {
		return nil, err
	}
	if err := idx.checkFolders(p, nil); err != nil {
		return nil, refusef("%q: %v", p, err)
	}
	if err := idx.checkTotals([]change{{path: p, bytes: len(data)}}); err != nil {
		return nil, err
	}
	old, exists := idx.byPath[p]
	if exists {
		err = w.client.WorkspaceFile.UpdateOneID(old.id).
			SetContent("").SetChars(0).SetBytes(int64(len(data))).SetMediaType(mediaType).SetData(data).
			Exec(ctx)
	} else {
		err = w.client.WorkspaceFile.Create().
			SetConversationID(w.conv).SetPath(p).
			SetContent("").SetChars(0).SetBytes(int64(len(data))).SetMediaType(mediaType).SetData(data).
			Exec(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("write file: %w", err)
	}
	return &Written{Path: p, Bytes: len(data), Created: !exists}, nil
}

// stage checks one file of a batch and settles its content.
func (w *Workspace) stage(ctx context.Context, f *FileInput) (staged, error) {
	p, err := CleanPath(f.Path)
	if err != nil {
		return staged{}, err
	}
	var content string
	switch {
	case f.Content != nil && f.ToolResultContext != nil:
		return staged{}, refusef("give content or _toolResultContext, not both")
	case f.Content != nil:
		content = *f.Content
	case f.ToolResultContext != nil:
		content, err = w.export(ctx, f.ToolResultContext)
		if err != nil {
			return staged{}, err
		}
	default:
		return staged{}, refusef("give content or _toolResultContext")
	}
	if err := checkText(content); err != nil {
		return staged{}, err
	}
	return staged{path: p, content: content, chars: utf8.RuneCountInString(content)}, nil
}

// EditInput is one replacement of edit_file.
type EditInput struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// EditResult is what edit_file answers.
type EditResult struct {
	Path  string `json:"path"`
	Chars int    `json:"chars"`
	Bytes int    `json:"bytes"`
	// Edits is the number of replacements made.
	Edits int `json:"edits"`
}

// Edit makes exact replacements in one file, in order, each on the text
// the previous ones left; each old text must occur exactly once at its
// turn. Any refusal leaves the file as it was.
func (w *Workspace) Edit(ctx context.Context, p string, edits []*EditInput) (*EditResult, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	if len(edits) == 0 || len(edits) > MaxEdits {
		return nil, refusef("edits: give 1 to %d edits per call, not %d", MaxEdits, len(edits))
	}
	f, err := w.text(ctx, p)
	if err != nil {
		return nil, err
	}
	text, err := ApplyEdits(f.Content, p, edits)
	if err != nil {
		return nil, err
	}
	if err := checkText(text); err != nil {
		return nil, err
	}
	idx, err := w.index(ctx)
	if err != nil {
		return nil, err
	}
	if err := idx.checkTotals([]change{{path: p, bytes: len(text)}}); err != nil {
		return nil, err
	}
	chars := utf8.RuneCountInString(text)
	err = w.client.WorkspaceFile.UpdateOneID(f.ID).
		SetContent(text).SetChars(int64(chars)).SetBytes(int64(len(text))).
		Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("edit file: %w", err)
	}
	return &EditResult{Path: p, Chars: chars, Bytes: len(text), Edits: len(edits)}, nil
}

// ApplyEdits makes exact replacements in text, in order, each on the text
// the previous ones left; each old text must occur exactly once at its
// turn, or the whole is refused. name is what refusals call the text (a
// path, an artifact). It is edit_file's rule, shared by every tool that
// edits by replacement.
func ApplyEdits(text, name string, edits []*EditInput) (string, error) {
	if len(edits) == 0 || len(edits) > MaxEdits {
		return "", refusef("edits: give 1 to %d edits per call, not %d", MaxEdits, len(edits))
	}
	for i, e := range edits {
		if e.Old == "" {
			return "", refusef("edits[%d]: old is empty: quote the exact text to replace", i)
		}
		at, n := find(text, e.Old, 2)
		switch n {
		case 0:
			return "", refusef("edits[%d]: old text not found in %q%s", i, name, after(i))
		case 1:
			text = text[:at] + e.New + text[at+len(e.Old):]
		default:
			return "", refusef("edits[%d]: old text occurs %d times in %q%s: include more of the text around it so it matches once",
				i, count(text, e.Old), name, after(i))
		}
	}
	return text, nil
}

func after(i int) string {
	if i == 0 {
		return ""
	}
	return " (after the edits before it)"
}

// find returns where sub first occurs in s and how many times it occurs,
// overlaps included, counting no further than limit.
func find(s, sub string, limit int) (first, n int) {
	first = strings.Index(s, sub)
	if first < 0 {
		return -1, 0
	}
	n = 1
	for i := first; n < limit; n++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		j := strings.Index(s[i+size:], sub)
		if j < 0 {
			break
		}
		i += size + j
	}
	return first, n
}

// count returns how many times sub occurs in s, overlaps included.
func count(s, sub string) int {
	_, n := find(s, sub, len(s)+1)
	return n
}

// index is what the limits need to know of a workspace: each file's id
// and size, without contents.
type index struct {
	byPath map[string]entry
	bytes  int
}

type entry struct {
	id    int
	bytes int
}

func (w *Workspace) index(ctx context.Context) (*index, error) {
	rows, err := w.files().
		Select(workspacefile.FieldID, workspacefile.FieldPath, workspacefile.FieldBytes).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load workspace: %w", err)
	}
	idx := &index{byPath: make(map[string]entry, len(rows))}
	for _, r := range rows {
		idx.byPath[r.Path] = entry{id: r.ID, bytes: int(r.Bytes)}
		idx.bytes += int(r.Bytes)
	}
	return idx, nil
}

// change is a file's size after a write.
type change struct {
	path  string
	bytes int
}

// checkTotals refuses changes that would take the workspace past MaxFiles
// or MaxWorkspaceBytes.
func (idx *index) checkTotals(changes []change) error {
	files, bytes := len(idx.byPath), idx.bytes
	for _, c := range changes {
		if old, ok := idx.byPath[c.path]; ok {
			bytes -= old.bytes
		} else {
			files++
		}
		bytes += c.bytes
	}
	if files > MaxFiles {
		return refusef("the workspace would hold %d files: the limit is %d; delete_file some first", files, MaxFiles)
	}
	if bytes > MaxWorkspaceBytes {
		return refusef("the workspace would hold %d bytes: the limit is %d; delete_file some first", bytes, MaxWorkspaceBytes)
	}
	return nil
}

// checkFolders refuses a path that would make a file a folder of another,
// or a folder a file, among the existing files and the batch before it.
func (idx *index) checkFolders(p string, batch []staged) error {
	taken := func(q string) bool {
		if _, ok := idx.byPath[q]; ok {
			return true
		}
		for _, s := range batch {
			if s.path == q {
				return true
			}
		}
		return false
	}
	for dir := p; ; {
		i := strings.LastIndexByte(dir, '/')
		if i < 0 {
			break
		}
		dir = dir[:i]
		if taken(dir) {
			return refusef("%q is a file, so it cannot be a folder", dir)
		}
	}
	prefix := p + "/"
	for q := range idx.byPath {
		if strings.HasPrefix(q, prefix) {
			return refusef("%q is a folder (it holds %q)", p, q)
		}
	}
	for _, s := range batch {
		if strings.HasPrefix(s.path, prefix) {
			return refusef("%q is a folder (it holds %q)", p, s.path)
		}
	}
	return nil
}
