package document_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db/dbtest"
	entdoc "github.com/toolgate/toolgate/ent/document"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/document/documenttest"
	"github.com/toolgate/toolgate/tools/embed"
)

// benchIngest processes one upload of original per iteration (extract,
// chunk, embed with the local embedder, store, index) on SQLite, and
// reports MB/s of extracted text; -benchmem's B/op is memory per ingest.
func benchIngest(b *testing.B, filename string, original []byte) {
	d := dbtest.Open(b, dbtest.SQLite)
	ctx := tenancy.System(context.Background())
	c := d.Client()
	svc, err := document.New(document.Config{DB: d, Embedder: embed.NewLocal()})
	require.NoError(b, err)
	org := c.Organization.Create().SetName("Acme").SaveX(ctx)
	kb := c.KnowledgeBase.Create().SetOrganizationID(org.ID).SetName("Handbook").SaveX(ctx)
	text, err := document.Extract(ctx, document.Detect(filename, "", original), original)
	require.NoError(b, err)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		doc := c.Document.Create().SetOrganizationID(org.ID).SetKnowledgeBaseID(kb.ID).
			SetFilename(filename).SetOriginal(original).SaveX(ctx)
		b.StartTimer()
		require.NoError(b, svc.Process(ctx, document.Ref{Document: doc.ID}))
		b.StopTimer()
		require.Equal(b, entdoc.StatusREADY, c.Document.GetX(ctx, doc.ID).Status)
		b.StartTimer()
	}
}

// BenchmarkIngestText: a 1 MB text file of prose-like words.
func BenchmarkIngestText(b *testing.B) {
	benchIngest(b, "notes.txt", []byte(documenttest.NewCorpus(3, 20_000).Text(1<<20)))
}

// BenchmarkIngestPDF20MB: a 20 MB PDF of 1,000 pages holding 3 MB of
// text, the rest a binary stream like the images of real PDFs.
func BenchmarkIngestPDF20MB(b *testing.B) {
	corpus := documenttest.NewCorpus(5, 20_000)
	pages := make([][]string, 1000)
	for i := range pages {
		pages[i] = strings.Split(strings.TrimSpace(corpus.Text(3000)), "\n\n")
	}
	pdf := documenttest.PaddedPDF(20<<20, pages...)
	require.GreaterOrEqual(b, len(pdf), 20<<20)
	benchIngest(b, "report.pdf", pdf)
}

// BenchmarkExtractBoxed: what the box adds to a one-page PDF, whose
// reading costs little: a child started, fed and reaped per file.
func BenchmarkExtractBoxed(b *testing.B) {
	pdf := documenttest.PDF([]string{"Quarterly revenue grew."})
	ctx := context.Background()
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			_, err := document.Extract(ctx, document.MIMEPDF, pdf)
			require.NoError(b, err)
		}
	})
	b.Run("boxed", func(b *testing.B) {
		box, err := document.DefaultBox()
		require.NoError(b, err)
		for b.Loop() {
			_, err := box.Extract(ctx, document.MIMEPDF, pdf)
			require.NoError(b, err)
		}
	})
}
