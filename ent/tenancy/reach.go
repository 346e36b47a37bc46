package tenancy

import "entgo.io/ent/dialect/sql"

// The reaches below are the scopes an entity can declare (through the
// mixins of ent/schema). Each names the columns it reads; the table must
// have them.

// OrganizationRow reaches the viewer's own organisation row (by id).
func OrganizationRow() Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) { s.Where(sql.EQ(s.C("id"), v.OrganizationID)) }
	}
}

// Organization reaches the rows of the viewer's organisation
// (organization_id).
func Organization() Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) { s.Where(sql.EQ(s.C("organization_id"), v.OrganizationID)) }
	}
}

// User reaches the viewer's own rows (organization_id and user_id); an
// admin's API token reaches every user's rows of the organisation when
// admins is true.
func User(admins bool) Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) {
			s.Where(sql.EQ(s.C("organization_id"), v.OrganizationID))
			if !admins || !v.organizationWide() {
				s.Where(sql.EQ(s.C("user_id"), v.UserID))
			}
		}
	}
}

// UserOrShared reaches the organisation's shared rows (user_id NULL) and
// the viewer's own; an admin's API token reaches every user's rows of the
// organisation (budgets: the organisation's limit and each user's).
func UserOrShared() Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) {
			s.Where(sql.EQ(s.C("organization_id"), v.OrganizationID))
			if !v.organizationWide() {
				s.Where(sql.Or(sql.IsNull(s.C("user_id")), sql.EQ(s.C("user_id"), v.UserID)))
			}
		}
	}
}

// UserOf reaches rows that hold only a user_id: the viewer's own, or, for
// an admin's API token, those of every user of the organisation.
func UserOf() Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) {
			if !v.organizationWide() {
				s.Where(sql.EQ(s.C("user_id"), v.UserID))
				return
			}
			u := sql.Table("users").As("reach_users")
			s.Where(sql.Exists(sql.Select(u.C("id")).From(u).
				Where(sql.And(sql.ColumnsEQ(u.C("id"), s.C("user_id")), sql.EQ(u.C("organization_id"), v.OrganizationID)))))
		}
	}
}

// Idempotency reaches rows of the viewer's organisation whose column holds
// the viewer's IdempotencyScope: what this caller sent, and nobody else.
func Idempotency(column string) Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) {
			s.Where(sql.And(sql.EQ(s.C("organization_id"), v.OrganizationID), sql.EQ(s.C(column), v.IdempotencyScope())))
		}
	}
}

// Conversation reaches the conversations themselves: a scope token its own
// conversation, a user their own, an admin's API token the organisation's.
func Conversation() Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) { conversationWhere(s, s, v) }
	}
}

// InConversation reaches rows whose column (usually conversation_id) names
// a conversation the viewer reaches.
func InConversation(column string) Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) { s.Where(sql.Exists(conversationOf(s.C(column), v))) }
	}
}

// InTurn reaches rows whose column (usually turn_id) names a turn of a
// conversation the viewer reaches.
func InTurn(column string) Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) {
			t := sql.Table("turns").As("reach_turns")
			s.Where(sql.Exists(sql.Select(t.C("id")).From(t).
				Where(sql.And(sql.ColumnsEQ(t.C("id"), s.C(column)), sql.Exists(conversationOf(t.C("conversation_id"), v))))))
		}
	}
}

// conversationOf selects the conversation the column names when the viewer
// reaches it. The reaches test each row's own conversation (EXISTS, a
// lookup by primary key) rather than listing every conversation the
// viewer reaches (IN): SQLite builds that list in full for each statement,
// so a read of one turn cost as much as the user had conversations.
func conversationOf(column string, v *Viewer) *sql.Selector {
	t := sql.Table("conversations").As("reach_conversations")
	sub := sql.Select(t.C("id")).From(t).Where(sql.ColumnsEQ(t.C("id"), column))
	conversationWhere(sub, t, v)
	return sub
}

type columner interface{ C(string) string }

func conversationWhere(s *sql.Selector, t columner, v *Viewer) {
	s.Where(sql.EQ(t.C("organization_id"), v.OrganizationID))
	switch {
	case v.Scoped():
		s.Where(sql.EQ(t.C("id"), v.ConversationID))
	case !v.Admin:
		s.Where(sql.EQ(t.C("user_id"), v.UserID))
	}
}
