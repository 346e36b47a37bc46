package graph_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ledongthuc/pdf"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/tools/artifact"
	"github.com/toolgate/toolgate/tools/workspace"
)

// download GETs a path of the server with token (none when empty) and
// extra headers, and returns the answer whole.
func (b *testBundle) download(t testing.TB, token, path string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, res.Header, body
}

// TestDownloadPrintedPDF: the PDF print_pdf wrote, printed in the real
// browser, downloads from the URL the API names, byte for byte, as an
// attachment; everything out of the caller's reach answers like nothing.
func TestDownloadPrintedPDF(t *testing.T) {
	t.Parallel()
	pool := needBrowser(t)
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := setupWith(t, d, func(c *graph.Config) { c.Browser = pool })
		tok := b.alice.Token
		agent := b.createAgentWith(t, tok, "Designer", []any{"create_artifact"})
		conv := b.startConversation(t, tok, agent, "deck")
		id := get(b.wsCall(t, tok, artifact.CreateArtifact, conv, map[string]any{
			"title": "Plan", "kind": "html", "content": threeSlides}).ok(t), "createArtifact", "artifactId")
		const print = `mutation($c: ID, $a: ID!, $p: String!) { printPdf(conversationId: $c, artifactId: $a, path: $p) { path pages bytes downloadUrl } }`
		// A draft is not printed: it is inspected first.
		wsRefused(t, b.do(t, tok, print, map[string]any{"c": conv, "a": id, "p": "out/Q3 plan (final).pdf"}), "uninspected draft")
		b.wsCall(t, tok, artifact.InspectArtifact, conv, map[string]any{"artifactId": id}).ok(t)
		pr := get(b.do(t, tok, print, map[string]any{"c": conv, "a": id, "p": "out/Q3 plan (final).pdf"}).ok(t), "printPdf")
		require.Equal(t, 3.0, get(pr, "pages"))
		url := get(pr, "downloadUrl").(string)
		require.Equal(t, "/conversations/"+conv+"/files/out/Q3%20plan%20%28final%29.pdf", url)
		b.wsCall(t, tok, workspace.WriteFile, conv, map[string]any{"files": []map[string]any{{"path": "notes/é.md", "content": "# Plan\n"}}}).ok(t)
		const list = `query($c: ID) { listFiles(conversationId: $c) { files { path mediaType downloadUrl } } }`
		files := get(b.do(t, tok, list, map[string]any{"c": conv}).ok(t), "listFiles", "files").([]any)
		require.Len(t, files, 2)
		require.Equal(t, "/conversations/"+conv+"/files/notes/%C3%A9.md", get(files[0], "downloadUrl"))
		require.Equal(t, url, get(files[1], "downloadUrl"), "the listing names the same URL")
		scoped := b.scopeToken(t, conv, "list_files")
		viaScope := get(b.do(t, scoped, list, nil).ok(t), "listFiles", "files").([]any)
		require.Equal(t, url, get(viaScope, 1, "downloadUrl"), "a turn's listing names it by its own conversation")

		// The PDF, as stored, with the right page count.
		status, h, body := b.download(t, tok, url, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		require.True(t, bytes.HasPrefix(body, []byte("%PDF-")))
		doc, err := pdf.NewReader(bytes.NewReader(body), int64(len(body)))
		require.NoError(t, err)
		require.Equal(t, 3, doc.NumPage())
		require.Equal(t, get(pr, "bytes"), float64(len(body)))
		require.Equal(t, "application/pdf", h.Get("Content-Type"))
		require.Equal(t, `attachment; filename="Q3_plan__final_.pdf"; filename*=UTF-8''Q3%20plan%20%28final%29.pdf`, h.Get("Content-Disposition"))
		require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
		require.Equal(t, graph.FileCSP, h.Get("Content-Security-Policy"))
		require.True(t, strings.HasPrefix(h.Get("Content-Security-Policy"), "sandbox"))
		require.NotEmpty(t, h.Get("Last-Modified"))
		etag := h.Get("ETag")
		require.NotEmpty(t, etag)
		status, _, body = b.download(t, tok, url, map[string]string{"If-None-Match": etag})
		require.Equal(t, http.StatusNotModified, status)
		require.Empty(t, body)

		// A text file downloads as text.
		status, h, body = b.download(t, tok, get(files[0], "downloadUrl").(string), nil)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "# Plan\n", string(body))
		require.Equal(t, "text/plain; charset=utf-8", h.Get("Content-Type"))
		require.Equal(t, `attachment; filename="__.md"; filename*=UTF-8''%C3%A9.md`, h.Get("Content-Disposition"))

		// No token, or a wrong one: exactly GraphQL's 401.
		gqlStatus, gqlHeader, gqlBody := b.download(t, "", "/graphql?query=%7B__typename%7D", nil)
		require.Equal(t, http.StatusUnauthorized, gqlStatus)
		require.Equal(t, auth.Unauthenticated, string(gqlBody))
		for _, token := range []string{"", "tg_nonsense"} {
			status, h, body := b.download(t, token, url, nil)
			require.Equal(t, gqlStatus, status)
			require.Equal(t, gqlBody, body)
			require.Equal(t, gqlHeader.Get("WWW-Authenticate"), h.Get("WWW-Authenticate"))
		}

		// Another organisation, a colleague, a scope token (tool fields
		// only), a made-up conversation, a malformed id, a file that is not
		// there: one answer, byte for byte.
		nStatus, _, nothing := b.download(t, tok, "/conversations/"+graph.EncodeID(1<<40+9)+"/files/out/deck.pdf", nil)
		require.Equal(t, http.StatusNotFound, nStatus)
		require.JSONEq(t, `{"errors":[{"message":"not found","extensions":{"code":"NOT_FOUND"}}]}`, string(nothing))
		for _, tt := range []struct{ give, token, path string }{
			{"other organisation", b.eve.Token, url},
			{"colleague", b.bob.Token, url},
			{"scope token", scoped, url},
			{"made-up conversation", b.eve.Token, "/conversations/" + graph.EncodeID(1<<40+9) + "/files/out/deck.pdf"},
			{"malformed id", tok, "/conversations/nonsense/files/out/deck.pdf"},
			{"no such file", tok, "/conversations/" + conv + "/files/out/other.pdf"},
			{"a folder", tok, "/conversations/" + conv + "/files/out"},
		} {
			status, h, body := b.download(t, tt.token, tt.path, nil)
			require.Equal(t, nStatus, status, tt.give)
			require.Equal(t, nothing, body, tt.give)
			require.Empty(t, h.Get("Content-Disposition"), tt.give)
		}

		// A path no file can have is refused, saying why, for any
		// conversation alike.
		for _, tt := range []struct{ give, path, want string }{
			{"escaped traversal", "%2e%2e/%2e%2e/secret", `climbs out with ".."`},
			{"escaped slash traversal", "out%2f..%2f..%2fsecret", `climbs out with ".."`},
			{"NUL", "out/deck.pdf%00.txt", "control character"},
			{"backslash", "out%5cdeck.pdf", "backslash"},
			{"empty", "", "name a file"},
			{"not normal", "out/%2e/deck.pdf", "normal form"},
		} {
			for _, c := range []string{conv, graph.EncodeID(1<<40 + 9)} {
				status, h, body := b.download(t, tok, "/conversations/"+c+"/files/"+tt.path, nil)
				require.Equal(t, http.StatusBadRequest, status, tt.give)
				require.Equal(t, "application/json", h.Get("Content-Type"), tt.give)
				var answer struct {
					Errors []struct {
						Message    string
						Extensions map[string]string
					}
				}
				require.NoError(t, json.Unmarshal(body, &answer), string(body))
				require.Len(t, answer.Errors, 1)
				require.Equal(t, "BAD_USER_INPUT", answer.Errors[0].Extensions["code"], tt.give)
				require.Contains(t, answer.Errors[0].Message, tt.want, tt.give)
			}
		}

		wsRefused(t, b.wsCall(t, tok, workspace.ReadFile, conv, map[string]any{"path": "out/Q3 plan (final).pdf"}), "binary file")
	})
}
