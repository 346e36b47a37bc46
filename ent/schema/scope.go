package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/mixin"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// Scope is the mixin by which an entity declares whose its rows are.
// Tenancy is denied by default: every entity lists exactly one scope in its
// Mixin, and TestEveryEntityDeclaresAScope (scope_test.go) fails for a
// table whose entity does not. With a scope, a query made without a viewer
// (tenancy.WithViewer) or a system context (tenancy.System) is refused with
// not found, and a viewer's queries, updates and deletes reach only its rows.
//
// Pick the reach that matches the table's owner columns:
//
//	Scope(tenancy.Organization())                  organization_id: the organisation's (agents, knowledge bases, skills)
//	Scope(tenancy.User(false))                     organization_id + user_id: the user's own, admins included (memories)
//	Scope(tenancy.User(true))                      organization_id + user_id: the user's own; an admin's API token sees the organisation's (model calls)
//	Scope(tenancy.UserOrShared())                  organization_id + nullable user_id: the organisation's shared rows and the user's own; an admin's API token all (budgets)
//	Scope(tenancy.InConversation("conversation_id")) a conversation the viewer reaches (files, tasks, attachments, artifacts)
//	Scope(tenancy.InTurn("turn_id"))               a turn of such a conversation (tool calls)
//	SystemOnly()                                   server rows no viewer reads (settings)
//
// For example:
//
//	func (Memory) Mixin() []ent.Mixin {
//		return []ent.Mixin{TimeMixin{}, Scope(tenancy.User(false))}
//	}
//
// A viewer's create is checked against organization_id where the table has
// one; a row created under a conversation or turn names one the resolver
// loaded with the viewer's context first, so it is in reach.
//
// Server code that acts on no one's behalf (the runtime, commands, tests
// setting up rows) reads and writes with tenancy.System(ctx).
func Scope(r tenancy.Reach) ent.Mixin { return scopeMixin{policy: tenancy.Policy(r)} }

// SystemOnly is the scope of server-wide rows that no viewer reaches, such
// as the secret that signs scope tokens: only tenancy.System contexts read
// or write them.
func SystemOnly() ent.Mixin { return scopeMixin{policy: tenancy.Nobody()} }

type scopeMixin struct {
	mixin.Schema
	policy ent.Policy
}

// Policy of the scope.
func (m scopeMixin) Policy() ent.Policy { return m.policy }
