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
			u := sql.Table("users")
			s.Where(sql.In(s.C("user_id"),
				sql.Select(u.C("id")).From(u).Where(sql.EQ(u.C("organization_id"), v.OrganizationID))))
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
		return func(s *sql.Selector) { s.Where(sql.In(s.C(column), conversations(v))) }
	}
}

// InTurn reaches rows whose column (usually turn_id) names a turn of a
// conversation the viewer reaches.
func InTurn(column string) Reach {
	return func(v *Viewer) func(*sql.Selector) {
		return func(s *sql.Selector) {
			t := sql.Table("turns")
			s.Where(sql.In(s.C(column),
				sql.Select(t.C("id")).From(t).Where(sql.In(t.C("conversation_id"), conversations(v)))))
		}
	}
}

// conversations selects the ids of the conversations the viewer reaches.
func conversations(v *Viewer) *sql.Selector {
	t := sql.Table("conversations")
	sub := sql.Select(t.C("id")).From(t)
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
