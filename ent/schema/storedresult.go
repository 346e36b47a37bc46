package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/schematype"
)

// StoredResult is a tool result kept whole under an opaque ref, before the
// model hears of it.
type StoredResult struct {
	ent.Schema
}

// Fields of the StoredResult.
func (StoredResult) Fields() []ent.Field {
	return []ent.Field{
		field.Int("conversation_id").Immutable().Annotations(entgql.Skip()),
		field.String("ref").Unique().Immutable().NotEmpty(),
		field.Enum("kind").GoType(schematype.ResultKind("")).Immutable().
			Annotations(entgql.Type("ResultKind")),
		field.Bytes("content").Immutable().
			Annotations(entgql.Skip()).
			Comment("the whole result; read through readToolResult"),
		field.Int64("chars").Immutable().NonNegative(),
		field.Int64("bytes").Immutable().NonNegative(),
		field.Int64("items").Immutable().NonNegative(),
		field.Bool("truncated_at_source").Default(false).Immutable(),
	}
}

// Edges of the StoredResult.
func (StoredResult) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("conversation", Conversation.Type).
			Ref("results").Field("conversation_id").Unique().Required().Immutable().
			Annotations(entgql.Skip()),
		edge.To("tool_call", ToolCall.Type).Unique().
			Annotations(entgql.Skip()),
	}
}

// Annotations of the StoredResult.
func (StoredResult) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipWhereInput, entgql.SkipOrderField)}
}

// Indexes of the StoredResult.
func (StoredResult) Indexes() []ent.Index {
	return []ent.Index{index.Fields("conversation_id")}
}

// Mixin of the StoredResult.
func (StoredResult) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}}
}
