package store

import (
	"context"
	"fmt"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/application"
	"github.com/toolgate/toolgate/ent/modelcall"
	"github.com/toolgate/toolgate/ent/predicate"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/storedresult"
	"github.com/toolgate/toolgate/ent/turn"
)

// Claim takes the turn for this runner with one conditional update: it
// runs, and no other live runner (its heartbeat older than staleAfter)
// holds it. On PostgreSQL the same statement loads the turn (claimAndLoad),
// and a claimed turn comes with what it loaded; on SQLite loaded is nil,
// and the run loads the turn after (Load).
func (s *Store) Claim(ctx context.Context, turnID int, staleAfter time.Duration) (claimed bool, loaded *Loaded, err error) {
	now := s.now()
	if s.dialect == dialect.Postgres {
		upd := entsql.Dialect(dialect.Postgres).Update(turn.Table).
			Set(turn.FieldClaimedBy, s.runner).Set(turn.FieldHeartbeatAt, now).
			Where(entsql.And(entsql.EQ(turn.FieldID, turnID), entsql.EQ(turn.FieldStatus, turn.StatusRUNNING.String()),
				entsql.Or(entsql.IsNull(turn.FieldClaimedBy), entsql.IsNull(turn.FieldHeartbeatAt),
					entsql.LT(turn.FieldHeartbeatAt, now.Add(-staleAfter)))))
		return s.claimAndLoad(ctx, turnID, upd)
	}
	n, err := s.client.Turn.Update().
		Where(turn.ID(turnID), turn.StatusEQ(turn.StatusRUNNING),
			turn.Or(turn.ClaimedByIsNil(), turn.HeartbeatAtIsNil(), turn.HeartbeatAtLT(now.Add(-staleAfter)))).
		SetClaimedBy(s.runner).SetHeartbeatAt(now).Save(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("claim turn: %w", err)
	}
	return n > 0, nil, nil
}

// Heartbeat renews the runner's heartbeat on a turn it holds and that
// runs; it reports whether it did.
func (s *Store) Heartbeat(ctx context.Context, turnID int) (bool, error) {
	n, err := s.client.Turn.Update().Where(turn.ID(turnID), turn.ClaimedBy(s.runner), turn.StatusEQ(turn.StatusRUNNING)).
		SetHeartbeatAt(s.now()).Save(ctx)
	return n > 0, err
}

// Status reads a turn's status.
func (s *Store) Status(ctx context.Context, turnID int) (turn.Status, error) {
	st, err := s.client.Turn.Query().Where(turn.ID(turnID)).Select(turn.FieldStatus).Only(ctx)
	if err != nil {
		return "", err
	}
	return st.Status, nil
}

// Cancelled reports whether the turn was cancelled.
func (s *Store) Cancelled(ctx context.Context, turnID int) (bool, error) {
	n, err := s.client.Turn.Query().Where(turn.ID(turnID), turn.StatusEQ(turn.StatusCANCELLED)).Count(ctx)
	return n > 0, err
}

// Release lets go of a turn this runner holds, with no heartbeat, so a
// live runner's sweep, or this one's next start, takes it at once.
func (s *Store) Release(ctx context.Context, turnID int) error {
	return s.client.Turn.Update().Where(turn.ID(turnID), turn.ClaimedBy(s.runner)).
		ClearClaimedBy().ClearHeartbeatAt().Exec(ctx)
}

// Steps counts the model calls a turn's steps made.
func (s *Store) Steps(ctx context.Context, turnID int) (int, error) {
	n, err := s.client.ModelCall.Query().Where(modelcall.TurnID(turnID), modelcall.KindEQ(modelcall.KindSTEP)).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count steps: %w", err)
	}
	return n, nil
}

// Beat is a turn's heartbeat as the sweep reads it.
type Beat struct {
	ID          int        `json:"id"`
	HeartbeatAt *time.Time `json:"heartbeat_at"`
}

// Running reads the turns that run, with their heartbeats.
func (s *Store) Running(ctx context.Context) ([]Beat, error) {
	var out []Beat
	err := s.client.Turn.Query().Where(turn.StatusEQ(turn.StatusRUNNING)).
		Select(turn.FieldID, turn.FieldHeartbeatAt).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("find running turns: %w", err)
	}
	return out, nil
}

// Requeue marks a turn whose runner is gone (no heartbeat, or one older
// than stale) queued as of now, with one conditional update, and reports
// whether this sweep won it: of several replicas sweeping at once exactly
// one does.
func (s *Store) Requeue(ctx context.Context, turnID int, now, stale time.Time) (bool, error) {
	abandoned := func() predicate.Turn {
		return turn.And(turn.StatusEQ(turn.StatusRUNNING),
			turn.Or(turn.HeartbeatAtIsNil(), turn.HeartbeatAtLT(stale)))
	}
	won, err := s.client.Turn.Update().Where(turn.ID(turnID), abandoned()).
		ClearClaimedBy().SetHeartbeatAt(now).Save(ctx)
	if err != nil {
		return false, fmt.Errorf("queue turn: %w", err)
	}
	return won > 0, nil
}

// Holder is a turn's state as the reap reads it.
type Holder struct {
	ID          int         `json:"id"`
	Status      turn.Status `json:"status"`
	ClaimedBy   *string     `json:"claimed_by"`
	HeartbeatAt *time.Time  `json:"heartbeat_at"`
}

// Holders reads the status and holder of turns.
func (s *Store) Holders(ctx context.Context, turnIDs []int) ([]Holder, error) {
	var out []Holder
	err := s.client.Turn.Query().Where(turn.IDIn(turnIDs...)).
		Select(turn.FieldID, turn.FieldStatus, turn.FieldClaimedBy, turn.FieldHeartbeatAt).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("load turns of running jobs: %w", err)
	}
	return out, nil
}

// Applications reads an organisation's applications, by name.
func (s *Store) Applications(ctx context.Context, organizationID int) ([]*ent.Application, error) {
	rows, err := s.client.Application.Query().
		Where(application.OrganizationID(organizationID)).
		Order(ent.Asc(application.FieldName)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load applications: %w", err)
	}
	return rows, nil
}

// Media reads the stored results of non-text media among ids.
func (s *Store) Media(ctx context.Context, ids []int) ([]*ent.StoredResult, error) {
	rows, err := s.client.StoredResult.Query().
		Where(storedresult.IDIn(ids...), storedresult.KindEQ(schematype.KindMedia)).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load images: %w", err)
	}
	return rows, nil
}
