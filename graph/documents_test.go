package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/document/documenttest"
	"github.com/toolgate/toolgate/tools/embed"
)

// docSetup serves the API with the documents service working, and an
// upload limit of 1 MiB + 512 KiB, past the ordinary body limit.
func docSetup(t *testing.T, d *db.DB) *testBundle {
	t.Helper()
	return docSetupWith(t, d, embed.NewLocal())
}

// docSetupWith is docSetup with embedder e.
func docSetupWith(t *testing.T, d *db.DB, e embed.Embedder) *testBundle {
	t.Helper()
	return docSetupBox(t, d, e, nil)
}

// docSetupBox is docSetupWith extracting in box (nil: the default).
func docSetupBox(t *testing.T, d *db.DB, e embed.Embedder, box *document.Box) *testBundle {
	t.Helper()
	b := setup(t, d)
	svc, err := document.New(document.Config{DB: d, Embedder: e, Box: box})
	require.NoError(t, err)
	require.NoError(t, svc.Open(context.Background()))
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	srv := httptest.NewServer(graph.NewServer(graph.Config{DB: d, Signer: b.signer, Documents: svc, MaxUploadBytes: 3 << 19}))
	t.Cleanup(srv.Close)
	b.srv = srv
	return b
}

// upload posts a GraphQL multipart request (the spec's operations, map and
// file parts) with one file in variable path.
func (b *testBundle) upload(t *testing.T, token, query string, vars map[string]any, path, filename string, data []byte) *response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	ops, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	require.NoError(t, mw.WriteField("operations", string(ops)))
	require.NoError(t, mw.WriteField("map", `{"0": ["`+path+`"]}`))
	fw, err := mw.CreateFormFile("0", filename)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/graphql", &body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r := &response{Status: res.StatusCode, Raw: raw}
	require.NoError(t, json.Unmarshal(raw, r), string(raw))
	return r
}

const addDocument = `mutation($kb: ID!, $file: Upload) { addDocument(input: {knowledgeBaseId: $kb, file: $file}) { id title mimeType status } }`

func TestUploadEachFormatAndABadFileFailsAlone(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := docSetup(t, d)
		kb := get(b.do(t, b.alice.Token, `mutation { createKnowledgeBase(input: {name: "Handbook"}) { id name } }`, nil).ok(t),
			"createKnowledgeBase", "id").(string)

		big := bytes.Repeat([]byte("Large policy text about travel. "), 40_000) // 1.2 MiB: past the ordinary limit
		files := []struct {
			name, mime, status, errPart string
			data                        []byte
		}{
			{"notes.txt", document.MIMEText, "READY", "", []byte("The VPN token code is ZX-4411.")},
			{"guide.md", document.MIMEMarkdown, "READY", "", []byte("# Travel\n\nBook trains, not planes.")},
			{"page.html", document.MIMEHTML, "READY", "", []byte("<p>Cafeteria opens at noon.</p>")},
			{"report.pdf", document.MIMEPDF, "READY", "", documenttest.PDF([]string{"Quarterly revenue grew."})},
			{"memo.docx", document.MIMEDOCX, "READY", "", documenttest.DOCX("Expenses are reimbursed monthly.")},
			{"locked.pdf", document.MIMEPDF, "FAILED", "the PDF is encrypted", documenttest.EncryptedPDF()},
			{"scan.pdf", document.MIMEPDF, "FAILED", "no text found in the PDF", documenttest.ImagePDF()},
			{"fake.docx", document.MIMEDOCX, "FAILED", "not a DOCX file", documenttest.ZipNotDOCX()},
			{"big.txt", document.MIMEText, "READY", "", big},
		}
		for _, f := range files {
			d := b.upload(t, b.alice.Token, addDocument, map[string]any{"kb": kb, "file": nil}, "variables.file", f.name, f.data).ok(t)
			require.Equal(t, f.mime, get(d, "addDocument", "mimeType"), f.name)
			require.Equal(t, "PROCESSING", get(d, "addDocument", "status"), f.name)
		}
		// A title and text, no file.
		b.do(t, b.alice.Token, `mutation($kb: ID!) { addDocument(input: {knowledgeBaseId: $kb, title: "Policy", text: "Parking is free."}) { id } }`,
			map[string]any{"kb": kb}).ok(t)

		// Past the upload limit: 413; members may not add documents.
		tooBig := b.upload(t, b.alice.Token, addDocument, map[string]any{"kb": kb, "file": nil}, "variables.file", "huge.txt", bytes.Repeat([]byte("a"), 2<<20))
		require.Equal(t, http.StatusRequestEntityTooLarge, tooBig.Status)
		require.Equal(t, "FORBIDDEN", b.upload(t, b.bob.Token, addDocument, map[string]any{"kb": kb, "file": nil}, "variables.file", "x.txt", []byte("x")).code(t))
		require.Equal(t, "NOT_FOUND", b.upload(t, b.eve.Token, addDocument, map[string]any{"kb": kb, "file": nil}, "variables.file", "x.txt", []byte("x")).code(t))

		const list = `{ knowledgeBases(first: 10) { edges { node { name documents(first: 20) { totalCount edges { node { filename title status error chars chunks } } } } } } }`
		var docs []any
		require.Eventually(t, func() bool {
			d := b.do(t, b.alice.Token, list, nil).ok(t)
			docs = get(d, "knowledgeBases", "edges", 0, "node", "documents", "edges").([]any)
			for _, e := range docs {
				if get(e, "node", "status") == "PROCESSING" {
					return false
				}
			}
			return len(docs) == len(files)+1
			// Each file is read in a child of this test binary, which
			// starts slowly under the race detector on a loaded machine.
		}, 90*time.Second, 100*time.Millisecond)
		for i, f := range files {
			n := get(docs[i], "node").(map[string]any)
			require.Equal(t, f.name, n["filename"])
			require.Equal(t, f.status, n["status"], "%s: %v", f.name, n["error"])
			if f.errPart != "" {
				require.Contains(t, n["error"], f.errPart)
				continue
			}
			require.Nil(t, n["error"])
			require.Positive(t, n["chars"])
			require.Positive(t, n["chunks"])
		}
		require.Empty(t, get(b.do(t, b.eve.Token, list, nil).ok(t), "knowledgeBases", "edges"))
	})
}

func TestAttachFileToAConversation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		b := docSetup(t, d)
		conv := b.startConversation(t, b.bob.Token, b.createAgent(t, b.alice.Token, "A"), "Files")
		const attach = `mutation($c: ID!, $file: Upload!) { attachFile(input: {conversationId: $c, file: $file}) { id filename status } }`
		d1 := b.upload(t, b.bob.Token, attach, map[string]any{"c": conv, "file": nil}, "variables.file", "memo.docx", documenttest.DOCX("Budget is 12,000 EUR.")).ok(t)
		require.Equal(t, "PROCESSING", get(d1, "attachFile", "status"))
		// Another organisation's caller cannot attach to it, as if it did not exist.
		require.Equal(t, "NOT_FOUND", b.upload(t, b.eve.Token, attach, map[string]any{"c": conv, "file": nil}, "variables.file", "x.txt", []byte("x")).code(t))

		require.Eventually(t, func() bool {
			d := b.do(t, b.bob.Token, `query($id: ID!) { conversation(id: $id) { attachments { filename status chars chunks } } }`, map[string]any{"id": conv}).ok(t)
			a := get(d, "conversation", "attachments").([]any)
			return len(a) == 1 && get(a[0], "status") == "READY" && get(a[0], "chunks").(float64) == 1
		}, 60*time.Second, 100*time.Millisecond)
	})
}
