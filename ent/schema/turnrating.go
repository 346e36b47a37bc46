package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// TurnRating is one person's thumbs up or down on a turn's answer, with an
// optional comment: one per person per turn, changed in place.
type TurnRating struct {
	ent.Schema
}

// Fields of the TurnRating.
func (TurnRating) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable(),
		field.Int("user_id").Immutable().Comment("who rated"),
		field.Int("turn_id").Immutable(),
		field.Int("agent_id").Immutable().Comment("the turn's agent, copied so ratings sum by agent without joins"),
		field.Enum("rating").Values("UP", "DOWN"),
		field.Text("comment").Default("").MaxLen(8000).Comment("at most 2,000 characters, checked by the API"),
	}
}

// Edges of the TurnRating.
func (TurnRating) Edges() []ent.Edge {
	return []ent.Edge{
		// A foreign key, so a conversation's deletion takes its ratings.
		edge.From("turn", Turn.Type).Ref("ratings").Field("turn_id").Unique().Required().Immutable().
			Annotations(entgql.Skip()),
	}
}

// Indexes of the TurnRating.
func (TurnRating) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("turn_id", "user_id").Unique(),
		index.Fields("organization_id", "updated_at"),
	}
}

// Annotations of the TurnRating.
func (TurnRating) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the TurnRating.
func (TurnRating) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.User(true))}
}
