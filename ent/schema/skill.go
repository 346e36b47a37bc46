package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// Skill is a set of instructions an admin publishes for the organisation's
// agents: an agent that binds it by name may load it (load_skill) on any
// turn. Publishing again under the same name replaces the instructions;
// turns load what is published when they call.
type Skill struct {
	ent.Schema
}

// Fields of the Skill.
func (Skill) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable(),
		field.String("name").NotEmpty().MaxLen(64).Immutable().
			Comment("lower-case letters, digits, '-' and '_'; what an agent binds and load_skill names"),
		field.String("description").NotEmpty().MaxLen(200).
			Comment("what the skill is for, in load_skill's description"),
		field.Text("instructions").NotEmpty().MaxLen(100_000),
		field.Int("published_by").Comment("the admin who last published it"),
	}
}

// Indexes of the Skill.
func (Skill) Indexes() []ent.Index {
	return []ent.Index{index.Fields("organization_id", "name").Unique()}
}

// Annotations of the Skill.
func (Skill) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Skill.
func (Skill) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.Organization())}
}
