package loop

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

// loadTurn reads the turn with its conversation, the conversation's agent,
// user and organisation, and whether the conversation holds an attachment
// and one whose text can be read, in one statement: ent would load each
// edge with a statement of its own.
func (t *turnRun) loadTurn(ctx context.Context) (attached, readable bool, err error) {
	found, attached, readable, err := t.readTurn(ctx, nil)
	if err == nil && !found {
		err = &ent.NotFoundError{}
	}
	if err != nil {
		return false, false, fmt.Errorf("load turn: %w", err)
	}
	return attached, readable, nil
}

// claimAndLoad claims the turn as work does and loads it as loadTurn does,
// in one statement on PostgreSQL: the claim's update returns the turn's
// row, which the load joins. It reports whether the turn was claimed; an
// error once it was (a row that cannot be decoded) is the load's, which
// fails the turn as a load after the claim would. SQLite, whose updates
// cannot feed a join, claims, then loads.
func (t *turnRun) claimAndLoad(ctx context.Context, claim *entsql.UpdateBuilder) (claimed bool, attached, readable bool, loadErr, err error) {
	found, attached, readable, err := t.readTurn(ctx, claim)
	var decode *decodeError
	switch {
	case errors.As(err, &decode):
		return true, false, false, fmt.Errorf("load turn: %w", decode.err), nil
	case err != nil:
		return false, false, false, nil, fmt.Errorf("claim turn: %w", err)
	}
	return found, attached, readable, nil, nil
}

// decodeError is a row read but not decoded.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }

func (e *decodeError) Unwrap() error { return e.err }

// readTurn runs the load's statement; with claim (PostgreSQL only), the
// turn is the row the claim's update returns, so there is none when the
// claim fails.
func (t *turnRun) readTurn(ctx context.Context, claim *entsql.UpdateBuilder) (found, attached, readable bool, err error) {
	var (
		tu   = &ent.Turn{}
		conv = &ent.Conversation{}
		a    = &ent.Agent{}
		u    = &ent.User{}
		o    = &ent.Organization{}
	)
	tables := loadedTables(tu, conv, a, u, o)
	d := t.r.cfg.Queue.Dialect()
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
			return false, false, false, err
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
		Where(entsql.EQ(tt.C(turn.FieldID), t.turnID))
	for _, readable := range []bool{false, true} {
		t := entsql.Table(attachment.Table)
		q := b.Select(t.C(attachment.FieldID)).From(t).
			Where(entsql.ColumnsEQ(t.C(attachment.FieldConversationID), ct.C(conversation.FieldID)))
		if readable {
			q.Where(entsql.NEQ(t.C(attachment.FieldStatus), attachment.StatusFAILED.String()))
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
	rows, err := t.client().QueryContext(ctx, prefix+query, append(args, selArgs...)...)
	if err != nil {
		return false, false, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, false, false, rows.Err()
	}
	if err := rows.Scan(dests...); err != nil {
		return false, false, false, &decodeError{err}
	}
	for _, c := range cols {
		if err := c.set(d); err != nil {
			return false, false, false, &decodeError{fmt.Errorf("%s: %w", c.name, err)}
		}
	}
	if err := rows.Close(); err != nil {
		return false, false, false, &decodeError{err}
	}
	u.Edges.Organization = o
	conv.Edges.Agent, conv.Edges.User = a, u
	t.turn, t.conv, t.limited = tu, conv, limited.Bool
	return true, att.Bool, read.Bool, nil
}

// loadedTable is a table loadTurn reads, with the columns it decodes.
type loadedTable struct {
	table string
	cols  []col
}

// loadedTables binds each column loadTurn reads to its field; a test holds
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
