package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/ent/tenancy"
)

// Summary is a model-written account of a range of a conversation's turns,
// replayed in their place once the history passes its budget. It is written
// once and never rewritten: it sits in the cached prefix of every later
// call, so its bytes must not change. A newer summary covers a later range.
type Summary struct {
	ent.Schema
}

// Fields of the Summary.
func (Summary) Fields() []ent.Field {
	return []ent.Field{
		field.Int("conversation_id").Immutable(),
		field.Int("from_turn").Immutable().Positive().Comment("the first turn number covered"),
		field.Int("to_turn").Immutable().Positive().Comment("the last turn number covered"),
		field.Text("text").Immutable(),
		field.Int("turn_id").Immutable().Comment("the turn whose prompt passed the budget and triggered it"),
		field.String("model").Immutable(),
		field.Float("cost").Default(0).Immutable().Comment("USD, of the model call that wrote it: cost_micros in dollars"),
		field.Int64("cost_micros").GoType(schematype.Micros(0)).Default(0).Immutable().
			Comment("USD × 1,000,000, exact, of the model call that wrote it"),
		field.Time("created_at").Default(time.Now).Immutable(),
	}
}

// Edges of the Summary.
func (Summary) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("conversation", Conversation.Type).
			Ref("summaries").Field("conversation_id").Unique().Required().Immutable(),
	}
}

// Indexes of the Summary: each summary ends later than the one before, so
// two runtimes compacting at once cannot both write one.
func (Summary) Indexes() []ent.Index {
	return []ent.Index{index.Fields("conversation_id", "to_turn").Unique()}
}

// Annotations of the Summary.
func (Summary) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Summary.
func (Summary) Mixin() []ent.Mixin {
	return []ent.Mixin{Scope(tenancy.InConversation("conversation_id"))}
}
