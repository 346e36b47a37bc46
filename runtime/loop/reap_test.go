package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
)

// The sweep finishes the turn jobs a dead process left "running" (River
// never rescues them: a turn's job has no timeout), and only those: a job
// whose runner still holds its turn, or that started moments ago, is left
// to run. A job whose turn ended or paused is completed, as River would
// have recorded it; one whose turn another job has is cancelled, saying
// why. The queue's metric then counts what runs.
func TestSweepFinishesDeadTurnJobs(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, d *db.DB) {
		ctx := tenancy.System(context.Background())
		h := newHarness(t, d, &scripted{})
		convID, err := gid.Decode(h.conversation(t))
		require.NoError(t, err)
		mk := func(n int, status turn.Status, claimedBy string, beat time.Time) int {
			c := h.client.Turn.Create().SetConversationID(convID).SetNumber(n).SetUserText("x").
				SetStartedAt(h.now).SetStatus(status).SetHeartbeatAt(beat)
			if claimedBy != "" {
				c.SetClaimedBy(claimedBy)
			}
			return c.SaveX(ctx).ID
		}
		fresh := h.now.Add(-loop.StaleAfter / 2)
		ended := mk(1, turn.StatusCOMPLETED, "r_dead", fresh)
		paused := mk(2, turn.StatusWAITING_FOR_CLARIFICATION, "r_dead", fresh)
		elsewhere := mk(3, turn.StatusRUNNING, "r_live", fresh) // another replica runs it
		held := mk(4, turn.StatusRUNNING, "r_live", fresh)
		jobs := map[string]int64{
			"ended":          orphanJob(t, d, ended, "r_dead", time.Minute),
			"paused":         orphanJob(t, d, paused, "r_dead", time.Minute),
			"taken up":       orphanJob(t, d, elsewhere, "r_dead", time.Minute),
			"gone":           orphanJob(t, d, 1<<30, "r_dead", time.Minute),
			"holds its turn": orphanJob(t, d, held, "r_live", time.Hour),
			"just started":   orphanJob(t, d, ended, "r_live", time.Second),
		}
		require.Equal(t, 6, runningTurnJobs(t, d))
		require.Equal(t, 6.0, h.scrape(t)[`toolgate_job_queue_jobs{state="running"}`])

		n, err := h.runner.Resume(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "no turn was taken up: the running ones beat")
		want := map[string]rivertype.JobState{
			"ended": rivertype.JobStateCompleted, "paused": rivertype.JobStateCompleted, "gone": rivertype.JobStateCompleted,
			"taken up":       rivertype.JobStateCancelled,
			"holds its turn": rivertype.JobStateRunning, "just started": rivertype.JobStateRunning,
		}
		for name, id := range jobs {
			row, err := d.Queue().Executor().JobGetByID(ctx, &riverdriver.JobGetByIDParams{ID: id})
			require.NoError(t, err, name)
			require.Equal(t, want[name], row.State, name)
			if row.State != rivertype.JobStateRunning {
				require.NotNil(t, row.FinalizedAt, name)
			}
			if name == "taken up" {
				require.Len(t, row.Errors, 1)
				require.Contains(t, row.Errors[0].Error, "the process working this job died")
			}
		}
		require.Equal(t, 2.0, h.scrape(t)[`toolgate_job_queue_jobs{state="running"}`], "the metric counts what runs")
	})
}
