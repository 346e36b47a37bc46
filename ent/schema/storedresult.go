package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
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
		field.String("ref").Unique().Immutable().NotEmpty().
			Comment("The opaque ref the result is read by (readToolResult, searchToolResults, read_tool_result, run_code's toolResults); valid only within its conversation."),
		field.Enum("kind").GoType(schematype.ResultKind("")).Immutable().
			Annotations(entgql.Type("ResultKind")).
			Comment("What the content holds: TEXT, JSON or MEDIA (never previewed)."),
		field.Bytes("content").Immutable().
			Annotations(entgql.Skip()).
			Comment("the whole result; read through readToolResult"),
		field.Int64("chars").Immutable().NonNegative().
			Comment("Unicode characters of the whole content."),
		field.Int64("bytes").Immutable().NonNegative().
			Comment("Bytes of the whole content, in UTF-8."),
		field.Int64("items").Immutable().NonNegative().
			Comment("How many items the content has: elements of a top-level JSON array, keys of a top-level object, or lines of text."),
		field.Bool("truncated_at_source").Default(false).Immutable().
			Comment("The tool cut its result before returning it: what is stored is all there is, but not all the tool had."),
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
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.InConversation("conversation_id"))}
}
