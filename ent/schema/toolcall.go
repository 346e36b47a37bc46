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

// ToolCall is one call the model asked for, as repaired and sent, and what
// came of it.
type ToolCall struct {
	ent.Schema
}

// Fields of the ToolCall.
func (ToolCall) Fields() []ent.Field {
	return []ent.Field{
		field.Int("turn_id").Immutable().Annotations(entgql.Skip()),
		field.Int("position").Immutable().NonNegative(),
		field.Int("step").Default(0).Immutable().Annotations(entgql.Skip()).
			Comment("the model call, counted from 0 in the turn, that asked for it"),
		field.String("call_id").Default("").Immutable().Annotations(entgql.Skip()).
			Comment("the provider's id for the call"),
		field.String("name").Immutable(),
		field.Text("arguments").Default("{}").
			Comment("JSON, as repaired and sent"),
		field.Enum("outcome").
			Values("PENDING", "HITS", "ABSENCE", "OUTAGE", "REFUSED", "ERROR", "MAY_HAVE_RUN").
			Default("PENDING").
			Annotations(entgql.Type("ToolOutcome")),
		field.Int("attempts").Default(0).NonNegative(),
		field.JSON("failures", []schematype.ItemFailure{}).Default([]schematype.ItemFailure{}).
			Annotations(entgql.Type("[ItemFailure!]")),
		field.JSON("evidence", []schematype.Span{}).Default([]schematype.Span{}).
			Annotations(entgql.Type("[Evidence!]")).
			Comment("the spans of stored results this call made visible to the model"),
		field.JSON("repairs", []schematype.Repair{}).Default([]schematype.Repair{}).
			Annotations(entgql.Type("[ArgumentRepair!]")),
		field.Text("message").Optional().Nillable().
			Comment("what the model was told, for refusals, errors and outages"),
		field.Text("heard").Optional().Nillable().Annotations(entgql.Skip()).
			Comment("exactly what the model received for this call"),
		field.String("ref").Optional().Nillable(),
		field.String("guardrail").Optional().Nillable().
			Comment("null, or why what the model heard of the result was flagged as instruction-like"),
		field.String("arguments_ref").Optional().Nillable().
			Comment("the ref arguments too long to replay whole are stored under, readable like a result"),
		field.Int("result_id").Optional().Nillable().Annotations(entgql.Skip()),
		field.Time("started_at").Default(time.Now).Immutable(),
		field.Time("finished_at").Optional().Nillable(),
	}
}

// Edges of the ToolCall.
func (ToolCall) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("turn", Turn.Type).
			Ref("tool_calls").Field("turn_id").Unique().Required().Immutable(),
		edge.From("result", StoredResult.Type).Ref("tool_call").Field("result_id").Unique().
			Annotations(entgql.Skip()),
	}
}

// Annotations of the ToolCall.
func (ToolCall) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipWhereInput, entgql.SkipOrderField)}
}

// Indexes of the ToolCall.
func (ToolCall) Indexes() []ent.Index {
	return []ent.Index{index.Fields("turn_id", "position").Unique()}
}

// Mixin of the ToolCall.
func (ToolCall) Mixin() []ent.Mixin {
	return []ent.Mixin{Scope(tenancy.InTurn("turn_id"))}
}
