package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// MonthlySpend is the running total of what one user of an organisation
// (user 0: the whole organisation) spent on model calls in one calendar
// month in UTC. It is derived: each model call adds its cost to its
// user's row and its organisation's, in the transaction that records the
// call (the db package's hooks), so a budget check reads two rows however busy the
// month has been, and never sums the month's model calls.
type MonthlySpend struct {
	ent.Schema
}

// Fields of the MonthlySpend.
func (MonthlySpend) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable(),
		field.Int("user_id").Immutable().Comment("0: the organisation's total, every user's"),
		field.String("month").Immutable().Comment("YYYY-MM in UTC: the month the model calls started in"),
		field.Int64("cost_micros").GoType(schematype.Micros(0)).Default(0).
			Comment("USD × 1,000,000, exact: the sum of the month's model calls' cost_micros"),
	}
}

// Indexes of the MonthlySpend.
func (MonthlySpend) Indexes() []ent.Index {
	return []ent.Index{index.Fields("organization_id", "month", "user_id").Unique()}
}

// Annotations of the MonthlySpend.
func (MonthlySpend) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the MonthlySpend.
func (MonthlySpend) Mixin() []ent.Mixin {
	return []ent.Mixin{Scope(tenancy.User(true))}
}
