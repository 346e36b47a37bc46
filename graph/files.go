package graph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/workspacefile"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools/workspace"
)

// FileCSP is the Content-Security-Policy a downloaded workspace file is
// served with: should a browser show it rather than save it, it runs in a
// sandbox of its own origin and reaches nothing.
const FileCSP = "sandbox; default-src 'none'; frame-ancestors 'none'"

// FileURL is where a workspace file downloads: a path on this server,
// beside /graphql, each segment of the file's path escaped.
func FileURL(conversationID int, filePath string) string {
	segs := strings.Split(filePath, "/")
	for i, s := range segs {
		segs[i] = pathEscape(s)
	}
	return "/conversations/" + gid.Encode(conversationID) + "/files/" + strings.Join(segs, "/")
}

// pathEscape escapes one path segment: every byte but the unreserved ones.
func pathEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// badPathBody is the answer to a path no workspace file can have.
func badPathBody(msg string) string {
	m, _ := json.Marshal(msg) // a string always marshals
	return `{"errors":[{"message":` + string(m) + `,"extensions":{"code":"BAD_USER_INPUT"}}]}`
}

// filePath checks the path a download asks for: it must be a workspace
// path in its normal form. Traversal (a ".." segment), a NUL or another
// control character, a backslash, an absolute path or an empty segment
// is refused, whatever the conversation, so the refusal says nothing of
// what exists.
func filePath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("name a file after /files/")
	case !utf8.ValidString(p):
		return "", errors.New("the path is not valid UTF-8")
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "", errors.New("the path has a control character (NUL included)")
	case strings.Contains(p, `\`):
		return "", errors.New("the path has a backslash: separate folders with /")
	case strings.HasPrefix(p, "/"):
		return "", errors.New("the path is absolute: give it relative to the workspace")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", errors.New(`the path climbs out with "..": give the file's workspace path`)
		}
	}
	c, err := workspace.CleanPath(p)
	if err != nil {
		return "", err
	}
	if c != p {
		return "", fmt.Errorf("the path is not in its normal form: ask for %q", c)
	}
	return c, nil
}

// attachment is the Content-Disposition of a download: the file's base
// name, as ASCII letters, digits, '.', '-' and '_' (anything else is '_')
// for every client, and whole in RFC 8187's encoding for those that read
// it. Nothing of it can end the header's quoted string.
func attachment(filePath string) string {
	name := path.Base(filePath)
	ascii := []byte(name)
	for i, c := range ascii {
		if !plainNameByte(c) {
			ascii[i] = '_'
		}
	}
	out := `attachment; filename="` + string(ascii) + `"`
	if string(ascii) != name {
		out += "; filename*=UTF-8''" + pathEscape(name)
	}
	return out
}

// plainNameByte reports whether c may stand in a filename as it is, in
// every client: an ASCII letter or digit, '.', '-' or '_'.
func plainNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}

// fileHandler serves GET /conversations/{conversationId}/files/{path...}:
// one workspace file, bytes as stored, with its media type (a text file is
// text/plain), as an attachment. It authorizes exactly as GraphQL does:
// the token first (none or a wrong one: the same 401), then the
// conversation read through the scoped client, so a conversation of
// another user or organisation, a made-up id and a file that does not
// exist all answer the same 404 bytes. A turn's scope token opens only
// tool fields, not this route. A path no file can have is refused with
// 400, before anything is read.
func fileHandler(client *ent.Client, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p, err := filePath(r.PathValue("path"))
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, badPathBody(err.Error()))
			return
		}
		f, err := findFile(r.Context(), client, r.PathValue("conversationId"), p)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			if !errors.Is(err, auth.ErrNotFound) {
				log.ErrorContext(r.Context(), "workspace file", "err", err)
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, `{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}]}`)
				return
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, notFoundBody)
			return
		}
		data, mediaType := f.Data, f.MediaType
		if mediaType == "" {
			data, mediaType = []byte(f.Content), "text/plain; charset=utf-8"
		}
		sum := sha256.Sum256(data)
		h := w.Header()
		h.Set("Content-Type", mediaType)
		h.Set("Content-Disposition", attachment(f.Path))
		h.Set("Content-Security-Policy", FileCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		// Kept privately and asked again each time: the ETag makes that a
		// 304 while the file is unchanged.
		h.Set("Cache-Control", "private, no-cache")
		h.Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
		// ServeContent answers conditional and range requests and HEAD.
		http.ServeContent(w, r, "", f.UpdatedAt, bytes.NewReader(data))
	})
}

// findFile reads the file at p of conversation id as the request's
// viewer; a conversation out of reach or absent, a malformed id or a
// missing file is auth.ErrNotFound.
func findFile(ctx context.Context, client *ent.Client, id, p string) (*ent.WorkspaceFile, error) {
	viewer, err := auth.FromContext(ctx)
	if err != nil || viewer.Scoped() {
		return nil, auth.ErrNotFound
	}
	convID, err := gid.Decode(id)
	if err != nil {
		return nil, auth.ErrNotFound
	}
	conv, err := client.Conversation.Get(ctx, convID)
	if ent.IsNotFound(err) {
		return nil, auth.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load conversation: %w", err)
	}
	f, err := client.WorkspaceFile.Query().
		Where(workspacefile.ConversationID(conv.ID), workspacefile.Path(p)).
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, auth.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load file: %w", err)
	}
	return f, nil
}

// listedConversation is the conversation whose workspace the operation
// lists: its root field's conversationId, or the scope token's own. A
// file listed has no conversation of its own to name it by.
func listedConversation(ctx context.Context) (int, error) {
	for fc := graphql.GetFieldContext(ctx); fc != nil; fc = fc.Parent {
		if id, ok := fc.Args["conversationId"].(*int); ok && id != nil {
			return *id, nil
		}
	}
	v, err := auth.FromContext(ctx)
	if err != nil {
		return 0, err
	}
	if v.Scoped() {
		return v.ConversationID, nil
	}
	return 0, errors.New("downloadUrl: no conversation to name the file by")
}
