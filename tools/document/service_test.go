package document_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/db"
	"github.com/toolgate/toolgate/ent/db/dbtest"
	entdoc "github.com/toolgate/toolgate/ent/document"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/document/documenttest"
	"github.com/toolgate/toolgate/tools/embed"
)

// soon retries a failed attempt at once.
type soon struct{}

func (soon) NextRetry(*rivertype.JobRow) time.Time { return time.Now() }

// stuck is an embedder that blocks until its context ends: a server
// stopped mid-processing.
type stuck struct {
	embed.Local
	started chan struct{}
}

func (s *stuck) Embed(ctx context.Context, _ []string) ([][]float32, error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func newDoc(t *testing.T, c *ent.Client) *ent.Document {
	t.Helper()
	ctx := tenancy.System(context.Background())
	org := c.Organization.Create().SetName("Acme").SaveX(ctx)
	kb := c.KnowledgeBase.Create().SetOrganizationID(org.ID).SetName("Handbook").SaveX(ctx)
	return c.Document.Create().SetOrganizationID(org.ID).SetKnowledgeBaseID(kb.ID).
		SetFilename("report.pdf").SetOriginal(documenttest.PDF([]string{"Quarterly revenue grew."})).SaveX(ctx)
}

func TestRestartMidProcessingResumes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		c := d.Client()
		doc := newDoc(t, c)

		blocked := &stuck{started: make(chan struct{}, 1)}
		first, err := document.New(document.Config{DB: d, Embedder: blocked, RetryPolicy: soon{}})
		require.NoError(t, err)
		// Open enqueues the document left PROCESSING, and it is enqueued
		// again: on PostgreSQL the duplicate locks the unique job's row
		// while a fetch may pass over it, and the job must still be worked
		// at once, not after the queue's poll a minute later.
		require.NoError(t, first.Open(ctx))
		require.NoError(t, first.Enqueue(ctx, document.Ref{Document: doc.ID}))
		select {
		case <-blocked.started:
		case <-time.After(30 * time.Second):
			t.Fatal("processing never started")
		}
		require.NoError(t, first.Close(ctx)) // the server stops mid-processing
		require.Equal(t, entdoc.StatusPROCESSING, c.Document.GetX(tenancy.System(ctx), doc.ID).Status)

		second, err := document.New(document.Config{DB: d, Embedder: embed.NewLocal(), RetryPolicy: soon{}})
		require.NoError(t, err)
		require.NoError(t, second.Open(ctx))
		t.Cleanup(func() { _ = second.Close(ctx) })
		require.Eventually(t, func() bool {
			return c.Document.GetX(tenancy.System(ctx), doc.ID).Status == entdoc.StatusREADY
		}, 30*time.Second, 50*time.Millisecond)
		got := c.Document.GetX(tenancy.System(ctx), doc.ID)
		require.Equal(t, 1, got.Chunks)
		require.Contains(t, got.Text, "Quarterly revenue grew.")
	})
}
