package document

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
)

// A file's job whose process died stays running in River's table until
// River rescues it, past JobTimeout plus a minute. So a live job says it
// lives: its worker stamps the job's metadata every HeartbeatEvery, and
// every process that processes files looks, at its start and then every
// SweepEvery, for running jobs whose stamp (or start, before the first
// stamp) is older than StaleAfter, and hands them back to River to try
// again, as River's rescuer would: retryable at once while attempts remain,
// discarded (and the file FAILED) when none do. A file whose process was
// killed is processed again within StaleAfter plus SweepEvery plus
// River's scheduling (its scheduler's 5 s, then the queue's fetch) after
// a restart, well within a minute, and the queue's metric counts only the
// jobs that run.
const (
	HeartbeatEvery = 5 * time.Second
	StaleAfter     = 15 * time.Second
	SweepEvery     = 10 * time.Second
)

// heartbeatKey is the job metadata's key for its worker's last stamp.
const heartbeatKey = "toolgate_heartbeat_at"

// rescueBatch is the most jobs one sweep reads.
const rescueBatch = 1000

// heartbeat stamps the job until ctx ends; the caller waits for it to
// return before the job's end is recorded, so River's own writes of the
// row never meet a stamp.
func (s *Service) heartbeat(ctx context.Context, jobID int64) {
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	exec := s.cfg.Queue.Executor()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			meta, err := json.Marshal(map[string]time.Time{heartbeatKey: time.Now().UTC()})
			if err != nil {
				return
			}
			// A stamp that fails is made again at the next beat; missed
			// for StaleAfter, the job looks dead and is tried again, which
			// a file's processing allows (it starts over each time).
			_, _ = exec.JobUpdate(ctx, &riverdriver.JobUpdateParams{ID: jobID, MetadataDoMerge: true, Metadata: meta})
		}
	}
}

// sweep rescues dead jobs until the service stops.
func (s *Service) sweep() {
	defer s.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.base.Done():
			return
		case <-t.C:
			if _, err := s.rescue(s.base); err != nil && s.base.Err() == nil {
				s.cfg.Log.Warn("rescue document jobs", "err", err)
			}
			t.Reset(SweepEvery)
		}
	}
}

// rescue hands the running file jobs whose process died back to River,
// and returns how many.
func (s *Service) rescue(ctx context.Context) (int, error) {
	exec := s.cfg.Queue.Executor()
	jobs, err := exec.JobList(ctx, &riverdriver.JobListParams{
		Max:           rescueBatch,
		WhereClause:   "state = @state AND kind = @kind",
		NamedArgs:     map[string]any{"state": string(rivertype.JobStateRunning), "kind": Ref{}.Kind()},
		OrderByClause: "id",
	})
	if err != nil {
		return 0, fmt.Errorf("list running document jobs: %w", err)
	}
	now := time.Now().UTC()
	horizon := now.Add(-StaleAfter)
	params := &riverdriver.JobSetStateIfRunningManyParams{Now: &now}
	var discarded []Ref
	for _, row := range jobs {
		last := lastSign(row)
		if last.IsZero() || !last.Before(horizon) {
			continue
		}
		errData, err := json.Marshal(rivertype.AttemptError{At: now, Attempt: max(row.Attempt, 0),
			Error: "the process working this job died"})
		if err != nil {
			return 0, fmt.Errorf("rescue document job: %w", err)
		}
		set := riverdriver.JobSetStateErrorRetryable(row.ID, now, errData, nil)
		if row.Attempt >= row.MaxAttempts {
			set = riverdriver.JobSetStateDiscarded(row.ID, now, errData, nil)
			var ref Ref
			if json.Unmarshal(row.EncodedArgs, &ref) == nil {
				discarded = append(discarded, ref)
			}
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
		return 0, fmt.Errorf("rescue document jobs: %w", err)
	}
	for _, ref := range discarded {
		s.fail(ctx, ref, fmt.Sprintf("processing failed: the process working it died %d times", MaxAttempts))
	}
	s.cfg.Log.Info("rescued the document jobs whose process died", "jobs", len(params.ID))
	return len(params.ID), nil
}

// lastSign is when a running job last showed it lives: its worker's last
// stamp, or its start before the first.
func lastSign(row *rivertype.JobRow) time.Time {
	var meta map[string]json.RawMessage
	if json.Unmarshal(row.Metadata, &meta) == nil {
		var at time.Time
		if raw, ok := meta[heartbeatKey]; ok && json.Unmarshal(raw, &at) == nil {
			// A stamp from an earlier attempt says nothing of this one.
			if row.AttemptedAt == nil || at.After(*row.AttemptedAt) {
				return at
			}
		}
	}
	if row.AttemptedAt == nil {
		return time.Time{}
	}
	return *row.AttemptedAt
}
