// Package tenancy says which rows a context may reach, and enforces it in
// ent's privacy policies: every entity's schema declares its reach with one
// of the scope mixins of ent/schema (schema.OrganizationScope and its
// siblings), whose policy is built here.
//
// A context reaches rows only in one of two ways:
//   - it carries a Viewer (WithViewer): every query is limited to the rows
//     the viewer reaches, and a mutation changes only those;
//   - it was made by System: trusted server code (the turn runtime, the
//     commands, the authenticator before there is a viewer) reaches every row.
//
// Anything else is refused with ErrNotFound. An entity whose schema declares
// no scope is caught by ent/schema's TestEveryEntityDeclaresAScope.
//
// The package imports nothing generated: ent/schema imports it, and the
// generated package imports ent/schema.
package tenancy

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"entgo.io/ent"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/privacy"
)

// ErrNotFound is the one answer for an object the caller cannot reach, for
// whatever reason: no token, a bad token, another organisation's object, or
// no object at all.
var ErrNotFound = errors.New("not found")

// Viewer is the caller, resolved from a token.
type Viewer struct {
	OrganizationID int
	UserID         int
	// Admin viewers reach every conversation of their organisation.
	Admin bool
	// ConversationID is set for a turn's scope token: it reaches that
	// conversation only.
	ConversationID int
	// TurnID is set for a turn's scope token.
	TurnID int
	// Tools are the tools a scope token was offered.
	Tools []string
}

// Scoped reports whether the viewer holds a turn's scope token rather than
// an API token.
func (v *Viewer) Scoped() bool { return v.TurnID != 0 }

// Offers reports whether a scope token was offered the tool. API tokens
// may drive every tool by hand (the playground).
func (v *Viewer) Offers(tool string) bool {
	if !v.Scoped() {
		return true
	}
	for _, t := range v.Tools {
		if t == tool {
			return true
		}
	}
	return false
}

// IdempotencyScope is where the viewer's Idempotency-Keys mean something: a
// turn's conversation for a scope token, the user for an API token.
func (v *Viewer) IdempotencyScope() string {
	if v.Scoped() {
		return fmt.Sprintf("conversation:%d", v.ConversationID)
	}
	return fmt.Sprintf("user:%d", v.UserID)
}

// organizationWide reports whether the viewer reaches every user's rows of
// its organisation: an admin holding an API token (a scope token acts for
// its own user only).
func (v *Viewer) organizationWide() bool { return v.Admin && !v.Scoped() }

type viewerKey struct{}

// WithViewer returns a context that carries the viewer.
func WithViewer(ctx context.Context, v *Viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

// FromContext returns the viewer, or ErrNotFound when there is none.
func FromContext(ctx context.Context) (*Viewer, error) {
	v, ok := ctx.Value(viewerKey{}).(*Viewer)
	if !ok || v == nil {
		return nil, ErrNotFound
	}
	return v, nil
}

// System returns a context that reaches every row of every organisation,
// for server code that acts on no one's behalf: the turn runtime, the
// commands, token lookup. Never derive a request's context from it.
func System(ctx context.Context) context.Context {
	return privacy.DecisionContext(ctx, privacy.Allow)
}

// Reach is the rows of one table a viewer reaches, as a WHERE clause on
// that table.
type Reach func(v *Viewer) func(*sql.Selector)

// ErrNoViewer refuses a query or mutation made with neither a viewer nor
// System. It is ErrNotFound to clients; the text tells a developer why.
var ErrNoViewer = fmt.Errorf("%w: no viewer in context (use tenancy.WithViewer, or tenancy.System for server code): %w", ErrNotFound, privacy.Deny)

// Policy is the privacy policy of an entity whose rows r says a viewer
// reaches: with no viewer it denies; with one, queries, updates and deletes
// are limited to those rows, and a create must name the viewer's
// organisation (and user) when the table has those columns.
func Policy(r Reach) ent.Policy {
	return privacy.Policy{
		Query:    privacy.QueryPolicy{queryRule(r)},
		Mutation: privacy.MutationPolicy{mutationRule(r)},
	}
}

// Nobody is the policy of server-wide rows no viewer reaches, such as the
// secret that signs scope tokens: only System contexts read or write them.
func Nobody() ent.Policy {
	deny := privacy.ContextQueryMutationRule(func(context.Context) error { return ErrNoViewer })
	return privacy.Policy{Query: privacy.QueryPolicy{deny}, Mutation: privacy.MutationPolicy{deny}}
}

type queryRule Reach

func (r queryRule) EvalQuery(ctx context.Context, q ent.Query) error {
	v, err := FromContext(ctx)
	if err != nil {
		return ErrNoViewer
	}
	if err := where(q, Reach(r)(v)); err != nil {
		return err
	}
	return privacy.Skip
}

type mutationRule Reach

func (r mutationRule) EvalMutation(ctx context.Context, m ent.Mutation) error {
	v, err := FromContext(ctx)
	if err != nil {
		return ErrNoViewer
	}
	if m.Op().Is(ent.OpCreate) {
		// A row is created with its owner columns set by the resolver from
		// the viewer; any other owner is another tenant's.
		if id, ok := m.Field("organization_id"); ok && id != v.OrganizationID {
			return fmt.Errorf("create %s in another organisation: %w", m.Type(), ErrNotFound)
		}
		return privacy.Skip
	}
	wp, ok := m.(interface{ WhereP(...func(*sql.Selector)) })
	if !ok {
		return fmt.Errorf("scope %s mutation: no WhereP: %w", m.Type(), privacy.Deny)
	}
	wp.WhereP(Reach(r)(v))
	return privacy.Skip
}

var selectorType = reflect.TypeOf(func(*sql.Selector) {})

// where adds p to a generated query's predicates. Generated queries take
// their own named predicate type (predicate.Agent, …), which this package
// cannot name without importing the generated code that imports it; each
// is a func(*sql.Selector) underneath, so p is converted by reflection.
func where(q ent.Query, p func(*sql.Selector)) error {
	m := reflect.ValueOf(q).MethodByName("Where")
	if !m.IsValid() || m.Type().NumIn() != 1 || !m.Type().IsVariadic() {
		return fmt.Errorf("scope %T: no Where method: %w", q, privacy.Deny)
	}
	pt := m.Type().In(0).Elem()
	if !selectorType.ConvertibleTo(pt) {
		return fmt.Errorf("scope %T: predicate %s is not a selector function: %w", q, pt, privacy.Deny)
	}
	m.Call([]reflect.Value{reflect.ValueOf(p).Convert(pt)})
	return nil
}
