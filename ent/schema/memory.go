package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// Memory is a fact the assistant saved about the person a turn talks to
// (memory_write). It belongs to the user within the organisation, reaches
// every agent of theirs with the memory switch on, and is theirs to list
// and forget.
type Memory struct {
	ent.Schema
}

// Fields of the Memory.
func (Memory) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable().Annotations(entgql.Skip()),
		field.Int("user_id").Immutable().Annotations(entgql.Skip()),
		field.String("text").NotEmpty().MaxLen(500).Immutable().Comment("the fact, as the assistant wrote it"),
	}
}

// Indexes of the Memory.
func (Memory) Indexes() []ent.Index {
	return []ent.Index{index.Fields("organization_id", "user_id")}
}

// Annotations of the Memory.
func (Memory) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.MultiOrder(), entgql.Skip(entgql.SkipWhereInput, entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)}
}

// Mixin of the Memory.
func (Memory) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.User(false))}
}
