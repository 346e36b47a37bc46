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

// ModelCall is one request to a model provider and what it cost. The
// organisation, agent and user are copied from the turn so usage sums by
// month need no joins.
type ModelCall struct {
	ent.Schema
}

// Fields of the ModelCall.
func (ModelCall) Fields() []ent.Field {
	return []ent.Field{
		field.Int("turn_id").Immutable(),
		field.Int("organization_id").Immutable(),
		field.Int("agent_id").Immutable(),
		field.Int("user_id").Immutable(),
		field.Int("step").Default(0).Immutable().Comment("0 for the turn's first model call"),
		field.Text("text").Default("").Immutable().Comment("what the model said in this step"),
		field.String("provider").Immutable(),
		field.String("model").Immutable(),
		field.Int64("input_tokens").Default(0).Immutable().Comment("uncached input"),
		field.Int64("cache_read_tokens").Default(0).Immutable(),
		field.Int64("cache_write_tokens").Default(0).Immutable(),
		field.Int64("output_tokens").Default(0).Immutable(),
		field.Float("cost").Default(0).Immutable().Comment("USD, cost_micros in dollars (the deprecated Float the API still shows)"),
		field.Int64("cost_micros").GoType(schematype.Micros(0)).Default(0).Immutable().
			Comment("USD × 1,000,000, exact: what money sums add up"),
		field.Int64("duration_ms").Default(0).Immutable(),
		field.Enum("kind").Values("STEP", "SUMMARY").Default("STEP").Immutable().
			Comment("STEP: one of the turn's own calls; SUMMARY: the compaction call the turn triggered"),
		field.Int64("prefix_tokens").Default(0).Immutable().
			Comment("the stable prefix sent (system prompt and tool definitions), in o200k tokens"),
		field.String("attribution").Default("").Immutable().
			Comment("who pays: the opaque ids sent to the provider as request metadata, never in the prompt"),
		field.Time("started_at").Default(time.Now).Immutable(),
	}
}

// Edges of the ModelCall.
func (ModelCall) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("turn", Turn.Type).
			Ref("model_calls").Field("turn_id").Unique().Required().Immutable().
			Annotations(entgql.Skip()),
	}
}

// Annotations of the ModelCall.
func (ModelCall) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Indexes of the ModelCall.
func (ModelCall) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("organization_id", "started_at"),
		index.Fields("turn_id"),
	}
}

// Mixin of the ModelCall.
func (ModelCall) Mixin() []ent.Mixin {
	return []ent.Mixin{Scope(tenancy.User(true))}
}
