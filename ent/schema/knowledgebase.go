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

// KnowledgeBase is a named set of an organisation's documents that agents
// bind (Agent.knowledge_base_ids) and knowledge_search searches.
type KnowledgeBase struct {
	ent.Schema
}

// Fields of the KnowledgeBase.
func (KnowledgeBase) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable().Annotations(entgql.Skip()),
		field.String("name").NotEmpty().MaxLen(200).Annotations(entgql.OrderField("NAME")).
			Comment("The knowledge base's name; at most 200 characters."),
	}
}

// Edges of the KnowledgeBase.
func (KnowledgeBase) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("documents", Document.Type).Annotations(entgql.RelayConnection()),
	}
}

// Indexes of the KnowledgeBase.
func (KnowledgeBase) Indexes() []ent.Index {
	return []ent.Index{index.Fields("organization_id", "name")}
}

// Mixin of the KnowledgeBase.
func (KnowledgeBase) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.Organization())}
}

// Annotations of the KnowledgeBase.
func (KnowledgeBase) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.MultiOrder(), entgql.Skip(entgql.SkipWhereInput, entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)}
}
