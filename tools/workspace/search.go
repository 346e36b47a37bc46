package workspace

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/predicate"
	"github.com/toolgate/toolgate/ent/workspacefile"
	"github.com/toolgate/toolgate/tools"
)

// Match is one excerpt of a search: matching lines of a file with their
// context lines, joined with "\n".
type Match struct {
	Path string `json:"path"`
	// Line is the number of the excerpt's first line, from 1.
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchResult is what search_files answers. Nothing matched is an
// absence (Absent).
type SearchResult struct {
	// Matches are in path order, then line order.
	Matches []Match `json:"matches"`
	// Hits is the number of matching lines in the workspace.
	Hits int `json:"hits"`
	// Shown is the number of matching lines in Matches; fewer than Hits
	// when the excerpts reached MaxSearchChars.
	Shown int `json:"shown"`
	// Unmatched are the strings found in no file.
	Unmatched []string `json:"unmatched"`
}

// Search finds the lines of the workspace's files that contain any of the
// strings, ignoring case, and returns them with contextLines lines each
// side (DefaultContextLines when nil), overlapping excerpts merged.
//
// Case is folded for ASCII letters when a string is all ASCII, and by
// Unicode simple folding otherwise; the first rule is one the database can
// apply too, so files that cannot match are never loaded.
func (w *Workspace) Search(ctx context.Context, strs []string, contextLines *int) (*SearchResult, error) {
	if len(strs) == 0 || len(strs) > MaxSearchStrings {
		return nil, refusef("strings: give 1 to %d strings, not %d", MaxSearchStrings, len(strs))
	}
	ctxLines := DefaultContextLines
	if contextLines != nil {
		if *contextLines < 0 || *contextLines > MaxContextLines {
			return nil, refusef("contextLines: give 0 to %d, not %d", MaxContextLines, *contextLines)
		}
		ctxLines = *contextLines
	}
	var qs []query
	allASCII, anyASCII := true, false
	for i, s := range strs {
		switch {
		case s == "":
			return nil, refusef("strings[%d] is empty", i)
		case utf8.RuneCountInString(s) > MaxStringChars:
			return nil, refusef("strings[%d] is %d characters: the limit is %d", i, utf8.RuneCountInString(s), MaxStringChars)
		case strings.ContainsAny(s, "\r\n"):
			return nil, refusef("strings[%d] has a line break: search_files matches within one line", i)
		}
		if slices.ContainsFunc(qs, func(q query) bool { return q.s == s }) {
			continue
		}
		q := newQuery(s)
		allASCII = allASCII && q.ascii
		anyASCII = anyASCII || q.ascii
		qs = append(qs, q)
	}
	fq := w.files()
	if allASCII {
		ps := make([]predicate.WorkspaceFile, len(qs))
		for i, q := range qs {
			ps[i] = workspacefile.ContentContainsFold(q.s)
		}
		fq.Where(workspacefile.Or(ps...))
	}
	files, err := fq.Select(workspacefile.FieldPath, workspacefile.FieldContent).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("search files: %w", err)
	}
	slices.SortFunc(files, func(a, b *ent.WorkspaceFile) int { return strings.Compare(a.Path, b.Path) })

	res := &SearchResult{Matches: []Match{}, Unmatched: []string{}}
	found := make([]bool, len(qs))
	left := MaxSearchChars
	for _, f := range files {
		lines := strings.Split(f.Content, "\n")
		var lower []string
		if anyASCII {
			lower = strings.Split(lowerASCII(f.Content), "\n")
		}
		hit := make([]int, len(lines)) // per line: 1 + the first query it matched, or 0
		for n, line := range lines {
			for k, q := range qs {
				l := line
				if q.ascii {
					l = lower[n]
				}
				// Every string is tried, so that each one found is known.
				if q.in(l) {
					if hit[n] == 0 {
						hit[n] = k + 1
					}
					found[k] = true
				}
			}
		}
		for _, ex := range excerpts(hit, ctxLines) {
			res.Hits += ex.hits
			if left <= 0 {
				continue
			}
			var (
				text  strings.Builder
				shown int
			)
			for n := ex.start; n < ex.end; n++ {
				var q *query
				if hit[n] > 0 {
					q = &qs[hit[n]-1]
				}
				line := cutLine(strings.TrimSuffix(lines[n], "\r"), q)
				chars := utf8.RuneCountInString(line)
				if n > ex.start {
					chars++ // the newline
				}
				if chars > left {
					// Past the budget: the rest is counted, not shown.
					left = 0
					break
				}
				left -= chars
				if n > ex.start {
					text.WriteByte('\n')
				}
				text.WriteString(line)
				if q != nil {
					shown++
				}
			}
			if shown > 0 {
				res.Shown += shown
				res.Matches = append(res.Matches, Match{Path: f.Path, Line: ex.start + 1, Text: text.String()})
			}
		}
	}
	for k, q := range qs {
		if !found[k] {
			res.Unmatched = append(res.Unmatched, q.s)
		}
	}
	return res, nil
}

// excerpt is lines [start, end) of a file holding hits matching lines.
type excerpt struct {
	start, end, hits int
}

// excerpts groups matching lines with their context, merging excerpts that
// overlap or touch.
func excerpts(hit []int, ctxLines int) []excerpt {
	var out []excerpt
	for n, h := range hit {
		if h == 0 {
			continue
		}
		start, end := max(n-ctxLines, 0), min(n+ctxLines+1, len(hit))
		if k := len(out) - 1; k >= 0 && start <= out[k].end {
			out[k].end = end
			out[k].hits++
			continue
		}
		out = append(out, excerpt{start: start, end: end, hits: 1})
	}
	return out
}

// cutLine shortens a line past MaxLineChars: around the match of q when the
// line matched, from its start when it is context.
func cutLine(line string, q *query) string {
	if utf8.RuneCountInString(line) <= MaxLineChars {
		return line
	}
	runes := []rune(line)
	from := 0
	if q != nil {
		if at := q.index(line); at >= 0 {
			from = utf8.RuneCountInString(line[:at]) - (MaxLineChars-utf8.RuneCountInString(q.s))/2
		}
	}
	from = min(max(from, 0), len(runes)-MaxLineChars)
	out := string(runes[from : from+MaxLineChars])
	if from > 0 {
		out = "…" + out
	}
	if from+MaxLineChars < len(runes) {
		out += "…"
	}
	return out
}

// query is one search string, ready to match.
type query struct {
	s     string
	lower string // ASCII-lowered, when ascii
	ascii bool
	runes int
	first []rune // the characters the first one folds with
}

func newQuery(s string) query {
	q := query{s: s, ascii: true, runes: utf8.RuneCountInString(s)}
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			q.ascii = false
			break
		}
	}
	if q.ascii {
		q.lower = lowerASCII(s)
		return q
	}
	r, _ := utf8.DecodeRuneInString(s)
	q.first = tools.CaseVariants(r)
	return q
}

// in reports whether the query occurs in line; for an ASCII query, line
// is already ASCII-lowered.
func (q query) in(line string) bool {
	if q.ascii {
		return strings.Contains(line, q.lower)
	}
	return q.index(line) >= 0
}

// index returns the byte offset of the query's first match in line (not
// lowered), or -1.
func (q query) index(line string) int {
	if q.ascii {
		return strings.Index(lowerASCII(line), q.lower)
	}
	for i, r := range line {
		// Compare only where the first character can match.
		if !slices.Contains(q.first, r) {
			continue
		}
		j, n := i, 0
		for j < len(line) && n < q.runes {
			_, size := utf8.DecodeRuneInString(line[j:])
			j += size
			n++
		}
		if n < q.runes {
			return -1
		}
		if strings.EqualFold(line[i:j], q.s) {
			return i
		}
	}
	return -1
}

// lowerASCII lowers ASCII letters only, so byte offsets stay the same.
func lowerASCII(s string) string {
	for i := range len(s) {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
