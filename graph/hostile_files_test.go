package graph_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/document/documenttest"
	"github.com/toolgate/toolgate/tools/embed"
)

// A member attaches hostile files (a PDF whose trailer's /Prev is its own
// cross-reference table, one whose page is its own /Parent, a 32 KB DOCX
// of two million nested paragraphs, and a PDF whose object stream
// /Extends itself, which only the box's CPU limit stops); an admin adds
// the deep DOCX to a knowledge base. Each ends FAILED with its reason
// within seconds, while the API goes on answering within a second.
func TestHostileUploadsFailWhileTheAPIAnswers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		box, err := document.DefaultBox()
		require.NoError(t, err)
		box.Limits.CPU = 2 * time.Second
		b := docSetupBox(t, d, embed.NewLocal(), box)
		conv := b.startConversation(t, b.bob.Token, b.createAgent(t, b.alice.Token, "A"), "Files")
		kb := get(b.do(t, b.alice.Token, `mutation { createKnowledgeBase(input: {name: "Handbook"}) { id } }`, nil).ok(t),
			"createKnowledgeBase", "id").(string)

		const attach = `mutation($c: ID!, $file: Upload!) { attachFile(input: {conversationId: $c, file: $file}) { id status } }`
		files := []struct {
			name   string
			data   []byte
			reason string
		}{
			{"prev.pdf", documenttest.PrevLoopPDF(), "cross-reference sections loop"},
			{"parent.pdf", documenttest.OwnParentPDF(), "/Parent chain loops"},
			{"deep.docx", documenttest.DeepDOCX(2_000_000), "nest more than 256 deep"},
			{"extends.pdf", documenttest.ExtendsLoopPDF(), "extraction exceeded its 2 s CPU limit"},
		}
		start := time.Now()
		for _, f := range files {
			require.Equal(t, "PROCESSING", get(b.upload(t, b.bob.Token, attach, map[string]any{"c": conv, "file": nil},
				"variables.file", f.name, f.data).ok(t), "attachFile", "status"), f.name)
		}
		require.Equal(t, "PROCESSING", get(b.upload(t, b.alice.Token, addDocument, map[string]any{"kb": kb, "file": nil},
			"variables.file", "deep.docx", documenttest.DeepDOCX(2_000_000)).ok(t), "addDocument", "status"))

		// Until every file has ended, each question is answered within 1 s.
		const attachments = `query($id: ID!) { conversation(id: $id) { attachments { filename status error } } }`
		const documents = `{ knowledgeBases(first: 1) { edges { node { documents(first: 5) { edges { node { status error } } } } } } }`
		var atts, docs []any
		slowest := time.Duration(0)
		ended := map[string]time.Duration{}
		for {
			asked := time.Now()
			atts = get(b.do(t, b.bob.Token, attachments, map[string]any{"id": conv}).ok(t), "conversation", "attachments").([]any)
			took := time.Since(asked)
			asked = time.Now()
			docs = get(b.do(t, b.alice.Token, documents, nil).ok(t), "knowledgeBases", "edges", 0, "node", "documents", "edges").([]any)
			took = max(took, time.Since(asked))
			slowest = max(slowest, took)
			require.Less(t, took, time.Second, "a question took %s", took)
			pending := 0
			for _, a := range atts {
				if get(a, "status") == "PROCESSING" {
					pending++
				} else if _, seen := ended[get(a, "filename").(string)]; !seen {
					ended[get(a, "filename").(string)] = time.Since(start).Round(time.Millisecond)
				}
			}
			if get(docs[0], "node", "status") == "PROCESSING" {
				pending++
			}
			if pending == 0 {
				break
			}
			// Generous: each file is read in a child of this test binary,
			// which starts slowly under the race detector on a loaded machine.
			require.Less(t, time.Since(start), 120*time.Second, "files still processing")
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("every file ended in %s (%v); the slowest question took %s", time.Since(start), ended, slowest)
		require.Len(t, atts, len(files))
		for i, f := range files {
			require.Equal(t, f.name, get(atts[i], "filename"))
			require.Equal(t, "FAILED", get(atts[i], "status"), f.name)
			require.Contains(t, get(atts[i], "error"), f.reason, f.name)
		}
		require.Equal(t, "FAILED", get(docs[0], "node", "status"))
		require.Contains(t, get(docs[0], "node", "error"), "nest more than 256 deep")
	})
}
