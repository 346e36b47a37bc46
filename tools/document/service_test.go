package document_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	"github.com/toolgate/toolgate/ent"
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

// Each hostile file ends FAILED with its reason within seconds, through
// the job that processes uploads, and its job is done: not tried again
// into the same loop. The loop no check knows ends at the box's CPU limit.
func TestHostileFilesFailOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		c := d.Client()
		box, err := document.DefaultBox()
		require.NoError(t, err)
		box.Limits.CPU = 2 * time.Second
		svc, err := document.New(document.Config{DB: d, Embedder: embed.NewLocal(), RetryPolicy: soon{}, Box: box})
		require.NoError(t, err)
		require.NoError(t, svc.Open(ctx))
		t.Cleanup(func() { _ = svc.Close(context.Background()) })

		org := c.Organization.Create().SetName("Acme").SaveX(ctx)
		kb := c.KnowledgeBase.Create().SetOrganizationID(org.ID).SetName("Handbook").SaveX(ctx)
		files := []struct {
			name   string
			data   []byte
			reason string
		}{
			{"prev.pdf", documenttest.PrevLoopPDF(), "cross-reference sections loop"},
			{"parent.pdf", documenttest.OwnParentPDF(), "/Parent chain loops"},
			{"deep.docx", documenttest.DeepDOCX(2_000_000), "nest more than 256 deep"},
			{"extends.pdf", documenttest.ExtendsLoopPDF(), "extraction exceeded its 2 s CPU limit"},
			{"fine.pdf", documenttest.PDF([]string{"Quarterly revenue grew."}), ""},
		}
		ids := make([]int, len(files))
		start := time.Now()
		for i, f := range files {
			ids[i] = c.Document.Create().SetOrganizationID(org.ID).SetKnowledgeBaseID(kb.ID).
				SetFilename(f.name).SetOriginal(f.data).SaveX(ctx).ID
			require.NoError(t, svc.Enqueue(ctx, document.Ref{Document: ids[i]}))
		}
		require.Eventually(t, func() bool {
			n, err := c.Document.Query().Where(entdoc.StatusEQ(entdoc.StatusPROCESSING)).Count(ctx)
			return err == nil && n == 0
		}, 30*time.Second, 50*time.Millisecond)
		require.Less(t, time.Since(start), 30*time.Second)
		t.Logf("all processed in %s", time.Since(start))
		for i, f := range files {
			got := c.Document.GetX(ctx, ids[i])
			if f.reason == "" {
				require.Equal(t, entdoc.StatusREADY, got.Status, f.name)
				continue
			}
			require.Equal(t, entdoc.StatusFAILED, got.Status, f.name)
			require.NotNil(t, got.Error, f.name)
			require.Contains(t, *got.Error, f.reason, f.name)
		}
		// One attempt each, finished: none waits to be tried again.
		// (A job is marked completed a moment after its file.)
		require.Eventually(t, func() bool {
			var jobs, done int
			err := d.SQL.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(CASE WHEN attempt = 1 AND state = 'completed' THEN 1 END) FROM river_job WHERE kind = 'toolgate_document'`).Scan(&jobs, &done)
			return err == nil && jobs == len(files) && done == jobs
		}, 10*time.Second, 50*time.Millisecond)
		var again int
		require.NoError(t, d.SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM river_job WHERE kind = 'toolgate_document' AND attempt > 1`).Scan(&again))
		require.Zero(t, again)
	})
}
