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

// Budget is a monthly spending limit an admin set: for the whole
// organisation (no user) or for one of its users. The limit is exact:
// integer micro-dollars, so a limit never drifts by float rounding.
type Budget struct {
	ent.Schema
}

// Fields of the Budget.
func (Budget) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable(),
		field.Int("user_id").Optional().Nillable().Immutable().Comment("none: the organisation's limit"),
		field.Int64("monthly_limit_micros").GoType(schematype.Micros(0)).NonNegative().Comment("USD × 1,000,000 per calendar month in UTC"),
	}
}

// Indexes of the Budget.
func (Budget) Indexes() []ent.Index {
	return []ent.Index{index.Fields("organization_id", "user_id")}
}

// Annotations of the Budget.
func (Budget) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Budget.
func (Budget) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.UserOrShared())}
}
