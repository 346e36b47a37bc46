package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/toolgate/toolgate/ent/turn"
)

// ReapEvery is how often the sweep looks for turn jobs whose process died
// when it took up no turn (it looks at once when it did, and at its first
// run).
const ReapEvery = time.Minute

// reapBatch is the most jobs one reap reads; the next takes the rest.
const reapBatch = 1000

// reap finishes the turn jobs River's table shows running whose process
// died. River rescues a job only past its timeout, and a turn's job has
// none (a turn takes as long as it takes): a killed process's job would
// stay running for good, and the queue's metric with it.
//
// A job is alive while the runner that fetched it (the last of its
// attempted_by, the runner's id) holds its turn with a fresh heartbeat. A
// live job holds its turn within moments of starting and lets go of it
// only as it ends, so a job that has run for StaleAfter without holding
// its turn is dead. Its row is set as River would have set it: completed
// when its turn no longer runs (ended, paused or gone: the job's work is
// done, the process died before River recorded it), cancelled, with an
// error saying so, when another job has the turn (the sweep took it up).
// A job set so that is in fact still winding down changes nothing: River
// writes a job's end only over a running row, and the turn's claim, not
// the job, decides who runs the turn.
func (r *Runner) reap(ctx context.Context) (int, error) {
	exec := r.cfg.Queue.Executor()
	jobs, err := exec.JobList(ctx, &riverdriver.JobListParams{
		Max:           reapBatch,
		WhereClause:   "state = @state AND kind = @kind",
		NamedArgs:     map[string]any{"state": string(rivertype.JobStateRunning), "kind": TurnArgs{}.Kind()},
		OrderByClause: "id",
	})
	if err != nil {
		return 0, fmt.Errorf("list running turn jobs: %w", err)
	}
	// River stamps attempted_at with the wall clock (the database's, on
	// PostgreSQL); heartbeats are written with the runner's clock (Now).
	horizon := time.Now().Add(-r.cfg.StaleAfter)
	type job struct {
		row    *rivertype.JobRow
		turnID int
	}
	var old []job
	ids := map[int]bool{}
	for _, row := range jobs {
		if row.AttemptedAt == nil || !row.AttemptedAt.Before(horizon) {
			continue
		}
		var args TurnArgs
		if err := json.Unmarshal(row.EncodedArgs, &args); err != nil {
			// Not a turn job River could work either: its work would fail.
			args.TurnID = 0
		}
		old = append(old, job{row: row, turnID: args.TurnID})
		ids[args.TurnID] = true
	}
	if len(old) == 0 {
		return 0, nil
	}
	turns, err := r.store.Holders(ctx, slices.Collect(maps.Keys(ids)))
	if err != nil {
		return 0, err
	}
	type state struct {
		running bool   // the turn runs
		holder  string // the runner that holds it, its heartbeat fresh
	}
	states := make(map[int]state, len(turns))
	stale := r.cfg.Now().Add(-r.cfg.StaleAfter)
	for _, t := range turns {
		st := state{running: t.Status == turn.StatusRUNNING}
		if st.running && t.ClaimedBy != nil && t.HeartbeatAt != nil && !t.HeartbeatAt.Before(stale) {
			st.holder = *t.ClaimedBy
		}
		states[t.ID] = st
	}
	now := time.Now().UTC()
	params := &riverdriver.JobSetStateIfRunningManyParams{Now: &now}
	for _, j := range old {
		st := states[j.turnID]
		by := ""
		if n := len(j.row.AttemptedBy); n > 0 {
			by = j.row.AttemptedBy[n-1]
		}
		if st.holder != "" && st.holder == by {
			continue // alive: it holds its turn
		}
		set := riverdriver.JobSetStateCompleted(j.row.ID, now, nil)
		if st.running {
			errData, err := json.Marshal(rivertype.AttemptError{At: now, Attempt: max(j.row.Attempt, 0),
				Error: "the process working this job died; another job has its turn"})
			if err != nil {
				return 0, fmt.Errorf("reap turn job: %w", err)
			}
			set = riverdriver.JobSetStateCancelled(j.row.ID, now, errData, nil)
		}
		params.ID = append(params.ID, set.ID)
		params.Attempt = append(params.Attempt, set.Attempt)
		params.ErrData = append(params.ErrData, set.ErrData)
		params.FinalizedAt = append(params.FinalizedAt, set.FinalizedAt)
		params.MetadataDoMerge = append(params.MetadataDoMerge, false)
		params.MetadataUpdates = append(params.MetadataUpdates, nil)
		params.ScheduledAt = append(params.ScheduledAt, set.ScheduledAt)
		params.State = append(params.State, set.State)
	}
	if len(params.ID) == 0 {
		return 0, nil
	}
	if _, err := exec.JobSetStateIfRunningMany(ctx, params); err != nil {
		return 0, fmt.Errorf("finish dead turn jobs: %w", err)
	}
	r.cfg.Log.Info("finished the jobs of turns whose process died", "jobs", len(params.ID))
	return len(params.ID), nil
}
