package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/toolgate/toolgate/db/pgtext"
	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/agent"
	"github.com/toolgate/toolgate/ent/attachment"
	entbudget "github.com/toolgate/toolgate/ent/budget"
	"github.com/toolgate/toolgate/ent/conversation"
	"github.com/toolgate/toolgate/ent/organization"
	"github.com/toolgate/toolgate/ent/turn"
	"github.com/toolgate/toolgate/ent/user"
)

// Loaded is a turn as its load read it, with what it belongs to: its
// conversation, whose edges hold the agent and the user (with the
// organisation).
type Loaded struct {
	Turn *ent.Turn
	Conv *ent.Conversation
	// Attached: the conversation holds an attachment; Readable: one whose
	// text can be read.
	Attached, Readable bool
	// Limited: a monthly limit of the organisation or the user is set.
	Limited bool
	// Err: the row was claimed but could not be decoded (Claim): the run
	// fails as a load after the claim would.
	Err error
}

// Load reads the turn with its conversation, the conversation's agent,
// user and organisation, and whether the conversation holds an attachment
// and one whose text can be read, in one statement: ent would load each
// edge with a statement of its own.
func (s *Store) Load(ctx context.Context, turnID int) (*Loaded, error) {
	l, err := s.readTurn(ctx, turnID, nil)
	if err == nil && l == nil {
		err = &ent.NotFoundError{}
	}
	if err != nil {
		return nil, fmt.Errorf("load turn: %w", err)
	}
	return l, nil
}

// claimAndLoad claims the turn as Claim does and loads it as Load does,
// in one statement on PostgreSQL: the claim's update returns the turn's
// row, which the load joins. It reports whether the turn was claimed; an
// error once it was (a row that cannot be decoded) is the load's, which
// fails the turn as a load after the claim would. SQLite, whose updates
// cannot feed a join, claims, then loads.
func (s *Store) claimAndLoad(ctx context.Context, turnID int, claim *entsql.UpdateBuilder) (bool, *Loaded, error) {
	l, err := s.readTurn(ctx, turnID, claim)
	var decode *decodeError
	switch {
	case errors.As(err, &decode):
		return true, &Loaded{Err: fmt.Errorf("load turn: %w", decode.err)}, nil
	case err != nil:
		return false, nil, fmt.Errorf("claim turn: %w", err)
	}
	return l != nil, l, nil
}

// decodeError is a row read but not decoded.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }

func (e *decodeError) Unwrap() error { return e.err }

// readTurn runs the load's statement; with claim (PostgreSQL only), the
// turn is the row the claim's update returns, so there is none (nil) when
// the claim fails.
func (s *Store) readTurn(ctx context.Context, turnID int, claim *entsql.UpdateBuilder) (*Loaded, error) {
	var (
		tu   = &ent.Turn{}
		conv = &ent.Conversation{}
		a    = &ent.Agent{}
		u    = &ent.User{}
		o    = &ent.Organization{}
	)
	tables := loadedTables(tu, conv, a, u, o)
	d := s.dialect
	b := entsql.Dialect(d)
	as := make([]*entsql.SelectTable, len(tables))
	for i, tb := range tables {
		as[i] = entsql.Table(tb.table).As(fmt.Sprintf("l%d", i))
	}
	var (
		prefix string
		args   []any
	)
	if claim != nil {
		// The claimed row, under the name the load reads the turn by.
		claim.Returning(turn.Columns...)
		var q string
		q, args = claim.Query()
		if err := claim.Err(); err != nil {
			return nil, err
		}
		prefix = `WITH "claimed" AS (` + q + `) `
		as[0] = entsql.Table("claimed").As("l0")
	}
	tt, ct, at, ut, ot := as[0], as[1], as[2], as[3], as[4]
	var (
		columns []string
		dests   []any
		cols    []col
	)
	for i, tb := range tables {
		for _, c := range tb.cols {
			columns = append(columns, as[i].C(c.name))
			dests = append(dests, c.dest)
			cols = append(cols, c)
		}
	}
	sel := b.Select(columns...).From(tt).
		Join(ct).On(tt.C(turn.FieldConversationID), ct.C(conversation.FieldID)).
		Join(at).On(ct.C(conversation.FieldAgentID), at.C(agent.FieldID)).
		Join(ut).On(ct.C(conversation.FieldUserID), ut.C(user.FieldID)).
		Join(ot).On(ut.C(user.FieldOrganizationID), ot.C(organization.FieldID)).
		Where(entsql.EQ(tt.C(turn.FieldID), turnID))
	for _, readable := range []bool{false, true} {
		at := entsql.Table(attachment.Table)
		q := b.Select(at.C(attachment.FieldID)).From(at).
			Where(entsql.ColumnsEQ(at.C(attachment.FieldConversationID), ct.C(conversation.FieldID)))
		if readable {
			q.Where(entsql.NEQ(at.C(attachment.FieldStatus), attachment.StatusFAILED.String()))
		}
		sel.AppendSelectExpr(entsql.Exists(q))
	}
	// Whether a monthly limit is set for the organisation or the user: the
	// steps' budget checks read nothing without one (limited).
	bt := entsql.Table(entbudget.Table)
	sel.AppendSelectExpr(entsql.Exists(b.Select(bt.C(entbudget.FieldID)).From(bt).Where(entsql.And(
		entsql.ColumnsEQ(bt.C(entbudget.FieldOrganizationID), ct.C(conversation.FieldOrganizationID)),
		entsql.Or(entsql.IsNull(bt.C(entbudget.FieldUserID)), entsql.ColumnsEQ(bt.C(entbudget.FieldUserID), ct.C(conversation.FieldUserID)))))))
	var att, read, limited sql.NullBool
	dests = append(dests, &att, &read, &limited)
	sel.SetTotal(len(args))
	query, selArgs := sel.Query()
	rows, err := s.client.QueryContext(ctx, prefix+query, append(args, selArgs...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	if err := rows.Scan(dests...); err != nil {
		return nil, &decodeError{err}
	}
	for _, c := range cols {
		if err := c.set(d); err != nil {
			return nil, &decodeError{fmt.Errorf("%s: %w", c.name, err)}
		}
	}
	if err := rows.Close(); err != nil {
		return nil, &decodeError{err}
	}
	u.Edges.Organization = o
	conv.Edges.Agent, conv.Edges.User = a, u
	return &Loaded{Turn: tu, Conv: conv, Attached: att.Bool, Readable: read.Bool, Limited: limited.Bool}, nil
}

// loadedTable is a table Load reads, with the columns it decodes.
type loadedTable struct {
	table string
	cols  []col
}

// loadedTables binds each column Load reads to its field; a test holds
// them to ent's columns, so a field added to the schema is loaded too.
func loadedTables(tu *ent.Turn, conv *ent.Conversation, a *ent.Agent, u *ent.User, o *ent.Organization) []loadedTable {
	return []loadedTable{
		{turn.Table, []col{
			intCol(turn.FieldID, &tu.ID), intCol(turn.FieldConversationID, &tu.ConversationID), intCol(turn.FieldNumber, &tu.Number),
			timeCol(turn.FieldStartedAt, &tu.StartedAt), timePtrCol(turn.FieldFinishedAt, &tu.FinishedAt),
			stringCol(turn.FieldTimeZone, &tu.TimeZone), stringCol(turn.FieldUserText, &tu.UserText),
			stringPtrCol(turn.FieldAnswer, &tu.Answer), stringPtrCol(turn.FieldThinking, &tu.Thinking),
			stringCol(turn.FieldStatus, (*string)(&tu.Status)), stringPtrCol(turn.FieldError, &tu.Error),
			jsonCol(turn.FieldSuggestions, &tu.Suggestions), jsonCol(turn.FieldClarification, &tu.Clarification),
			timePtrCol(turn.FieldHeartbeatAt, &tu.HeartbeatAt), jsonCol(turn.FieldAgentConfig, &tu.AgentConfig),
			stringPtrCol(turn.FieldClaimedBy, &tu.ClaimedBy), stringPtrCol(turn.FieldTraceParent, &tu.TraceParent),
			boolCol(turn.FieldReplayed, &tu.Replayed), boolCol(turn.FieldSuperseded, &tu.Superseded),
		}},
		{conversation.Table, []col{
			intCol(conversation.FieldID, &conv.ID), timeCol(conversation.FieldCreatedAt, &conv.CreatedAt),
			timeCol(conversation.FieldUpdatedAt, &conv.UpdatedAt), intCol(conversation.FieldOrganizationID, &conv.OrganizationID),
			intCol(conversation.FieldUserID, &conv.UserID), intCol(conversation.FieldAgentID, &conv.AgentID),
			stringPtrCol(conversation.FieldTitle, &conv.Title), intCol(conversation.FieldTurnsCount, &conv.TurnsCount),
			timePtrCol(conversation.FieldArchivedAt, &conv.ArchivedAt),
		}},
		{agent.Table, []col{
			intCol(agent.FieldID, &a.ID), timeCol(agent.FieldCreatedAt, &a.CreatedAt), timeCol(agent.FieldUpdatedAt, &a.UpdatedAt),
			intCol(agent.FieldOrganizationID, &a.OrganizationID), stringCol(agent.FieldName, &a.Name),
			stringCol(agent.FieldInstructions, &a.Instructions), jsonCol(agent.FieldTools, &a.Tools),
			boolCol(agent.FieldMemory, &a.Memory), boolCol(agent.FieldBudgetCheck, &a.BudgetCheck),
			boolCol(agent.FieldPastConversationSearch, &a.PastConversationSearch), jsonCol(agent.FieldSkills, &a.Skills),
			jsonCol(agent.FieldKnowledgeBaseIds, &a.KnowledgeBaseIds), enumCol(agent.FieldToolLoading, &a.ToolLoading),
			jsonCol(agent.FieldApprovals, &a.Approvals),
			timePtrCol(agent.FieldArchivedAt, &a.ArchivedAt),
		}},
		{user.Table, []col{
			intCol(user.FieldID, &u.ID), timeCol(user.FieldCreatedAt, &u.CreatedAt), timeCol(user.FieldUpdatedAt, &u.UpdatedAt),
			intCol(user.FieldOrganizationID, &u.OrganizationID), stringCol(user.FieldName, &u.Name),
			stringCol(user.FieldDepartment, &u.Department), boolCol(user.FieldAdmin, &u.Admin),
			timePtrCol(user.FieldDeactivatedAt, &u.DeactivatedAt),
			stringPtrCol(user.FieldOidcIssuer, &u.OidcIssuer), stringPtrCol(user.FieldOidcSubject, &u.OidcSubject),
		}},
		{organization.Table, []col{
			intCol(organization.FieldID, &o.ID), timeCol(organization.FieldCreatedAt, &o.CreatedAt),
			timeCol(organization.FieldUpdatedAt, &o.UpdatedAt), stringCol(organization.FieldName, &o.Name),
			boolCol(organization.FieldWebResearch, &o.WebResearch),
			intPtrCol(organization.FieldRateRequestsPerSecond, &o.RateRequestsPerSecond),
			intPtrCol(organization.FieldRateTurnsAtOnce, &o.RateTurnsAtOnce),
		}},
	}
}

// col is a column scanned as ent scans it, and set on its field after.
type col struct {
	name string
	dest any
	// set takes the database's dialect: strings read on PostgreSQL are
	// unescaped (pgtext.Read).
	set func(dialect string) error
}

func intCol(name string, p *int) col {
	var v sql.NullInt64
	return col{name, &v, func(string) error { *p = int(v.Int64); return nil }}
}

func intPtrCol(name string, p **int) col {
	var v sql.NullInt64
	return col{name, &v, func(string) error {
		if v.Valid {
			n := int(v.Int64)
			*p = &n
		}
		return nil
	}}
}

func boolCol(name string, p *bool) col {
	var v sql.NullBool
	return col{name, &v, func(string) error { *p = v.Bool; return nil }}
}

func stringCol(name string, p *string) col {
	var v sql.NullString
	return col{name, &v, func(d string) error { *p = pgtext.Read(d, v.String); return nil }}
}

func enumCol[T ~string](name string, p *T) col {
	var v sql.NullString
	return col{name, &v, func(string) error { *p = T(v.String); return nil }}
}

func stringPtrCol(name string, p **string) col {
	var v sql.NullString
	return col{name, &v, func(d string) error {
		if v.Valid {
			s := pgtext.Read(d, v.String)
			*p = &s
		}
		return nil
	}}
}

func timeCol(name string, p *time.Time) col {
	var v sql.NullTime
	return col{name, &v, func(string) error { *p = v.Time; return nil }}
}

func timePtrCol(name string, p **time.Time) col {
	var v sql.NullTime
	return col{name, &v, func(string) error {
		if v.Valid {
			*p = &v.Time
		}
		return nil
	}}
}

// jsonCol decodes a JSON column as ent does: an empty value leaves the
// field as it is.
func jsonCol(name string, p any) col {
	var v []byte
	return col{name, &v, func(string) error {
		if len(v) == 0 {
			return nil
		}
		return json.Unmarshal(v, p)
	}}
}
