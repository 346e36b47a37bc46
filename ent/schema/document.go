package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// Document is one file or text of a knowledge base.
type Document struct {
	ent.Schema
}

// Fields of the Document.
func (Document) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable().Annotations(entgql.Skip()),
		field.Int("knowledge_base_id").Immutable().Annotations(entgql.Skip()),
	}
}

// Edges of the Document.
func (Document) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("knowledge_base", KnowledgeBase.Type).
			Ref("documents").Field("knowledge_base_id").Unique().Required().Immutable().
			Annotations(entgql.Skip()),
	}
}

// Mixin of the Document.
func (Document) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, ContentMixin{}, Scope(tenancy.Organization())}
}

// Annotations of the Document.
func (Document) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.MultiOrder(), entgql.Skip(entgql.SkipWhereInput, entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)}
}
