package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// DocumentChunk is one passage of a document or an attachment, as search
// finds it. Its id is the passage's id in the hybrid index ("documents"),
// which keeps its text for full-text search and its vector.
//
// The owner is a plain column, not an edge, and the type is kept out of
// the GraphQL schema: the documents package reads chunks only for
// documents and attachments the caller's turn reaches.
type DocumentChunk struct {
	ent.Schema
}

// Fields of the DocumentChunk.
func (DocumentChunk) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable(),
		field.Int("document_id").Optional().Nillable().Immutable(),
		field.Int("attachment_id").Optional().Nillable().Immutable(),
		field.Int("seq").NonNegative().Immutable().Comment("the passage's place in its document, from 0"),
		field.Int("position").NonNegative().Immutable().Comment("offset of the passage's first character in the document's text"),
		field.Text("text").Immutable(),
		field.String("model").Default("").Immutable().Comment("the embedding model of the passage's vector"),
	}
}

// Indexes of the DocumentChunk.
func (DocumentChunk) Indexes() []ent.Index {
	return []ent.Index{index.Fields("document_id"), index.Fields("attachment_id")}
}

// Annotations of the DocumentChunk.
func (DocumentChunk) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the DocumentChunk.
func (DocumentChunk) Mixin() []ent.Mixin {
	return []ent.Mixin{Scope(tenancy.Organization())}
}
