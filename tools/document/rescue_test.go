package document_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/db/dbtest"
	entdoc "github.com/toolgate/toolgate/ent/document"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/embed"
)

// A file's job left running by a process that died (its last sign of life
// older than document.StaleAfter) is handed back to River at the next
// start and finished within a minute, not after River's own rescue past
// JobTimeout plus a minute: the file is processed and no job is left
// running for the queue's metric to count.
func TestDeadProcessesDocumentJobIsRescued(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		c := d.Client()
		doc := newDoc(t, c)
		exec := d.Queue().Executor()
		args, err := json.Marshal(document.Ref{Document: doc.ID})
		require.NoError(t, err)
		started := time.Now().Add(-time.Minute).UTC()
		// The row River leaves of a job whose process was killed mid-work.
		dead, err := exec.JobInsertFull(ctx, &riverdriver.JobInsertFullParams{
			Attempt: 1, AttemptedAt: &started, AttemptedBy: []string{"a-dead-process"},
			CreatedAt: &started, EncodedArgs: args, Kind: document.Ref{}.Kind(), MaxAttempts: document.MaxAttempts,
			Metadata: []byte("{}"), Priority: 1, Queue: document.Queue, ScheduledAt: &started,
			State: rivertype.JobStateRunning, Tags: []string{},
		})
		require.NoError(t, err)

		s, err := document.New(document.Config{DB: d, Embedder: embed.NewLocal()})
		require.NoError(t, err)
		at := time.Now()
		require.NoError(t, s.Open(ctx))
		t.Cleanup(func() { _ = s.Close(ctx) })
		require.Eventually(t, func() bool {
			return c.Document.GetX(tenancy.System(ctx), doc.ID).Status == entdoc.StatusREADY
		}, time.Minute, 100*time.Millisecond)
		// The dead job is tried again (and finds its work done) rather than
		// left running for the queue's metric to count.
		require.Eventually(t, func() bool {
			job, err := exec.JobGetByID(ctx, &riverdriver.JobGetByIDParams{ID: dead.ID})
			return err == nil && job.State == rivertype.JobStateCompleted
		}, time.Minute, 100*time.Millisecond)
		require.Less(t, time.Since(at), time.Minute)
		job, err := exec.JobGetByID(ctx, &riverdriver.JobGetByIDParams{ID: dead.ID})
		require.NoError(t, err)
		require.Equal(t, 2, job.Attempt)
		require.Contains(t, job.Errors[0].Error, "the process working this job died")
		counts, err := exec.JobCountByAllStates(ctx, &riverdriver.JobCountByAllStatesParams{})
		require.NoError(t, err)
		require.Zero(t, counts[rivertype.JobStateRunning])
	})
}
