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
		field.Int("position").Immutable().NonNegative().
			Comment("The call's place among its turn's calls, from 0, in the order the model asked for them."),
		field.Int("step").Default(0).Immutable().Annotations(entgql.Skip()).
			Comment("the model call, counted from 0 in the turn, that asked for it"),
		field.String("call_id").Default("").Immutable().Annotations(entgql.Skip()).
			Comment("the provider's id for the call"),
		field.String("name").Immutable().
			Comment("The tool's name, as the model called it; an application's tool as <application>__<tool>."),
		field.Text("arguments").Default("{}").
			Comment("JSON, as repaired and sent"),
		field.Enum("outcome").GoType(schematype.Outcome("")).
			Default(string(schematype.OutcomePending)).
			Annotations(entgql.Type("ToolOutcome")).
			Comment("How the call ended: PENDING until its outcome is recorded, then HITS, ABSENCE, OUTAGE, REFUSED, ERROR, MAY_HAVE_RUN or DECLINED (a person said no)."),
		field.Int("attempts").Default(0).NonNegative().
			Comment("How many times the call was sent to its resolver, retries included; 0 when it was refused before it ran."),
		field.JSON("failures", []schematype.ItemFailure{}).SchemaType(jsonColumn).Default([]schematype.ItemFailure{}).
			Annotations(entgql.Type("[ItemFailure!]")).
			Comment("Per-item failures, by item position: items that ran and matched nothing (ABSENCE), never ran (OUTAGE) or ran and failed (ERROR). The other items' results stand; empty when every item succeeded."),
		field.JSON("evidence", []schematype.Span{}).SchemaType(jsonColumn).Default([]schematype.Span{}).
			Annotations(entgql.Type("[Evidence!]")).
			Comment("the spans of stored results this call made visible to the model"),
		field.JSON("repairs", []schematype.Repair{}).SchemaType(jsonColumn).Default([]schematype.Repair{}).
			Annotations(entgql.Type("[ArgumentRepair!]")).
			Comment("What the runtime changed in the model's arguments to fit the tool's JSON Schema before sending them, in the order applied; empty when they were sent as written."),
		field.Text("message").Optional().Nillable().
			Comment("what the model was told, for refusals, errors and outages"),
		field.Text("heard").Optional().Nillable().Annotations(entgql.Skip()).
			Comment("exactly what the model received for this call"),
		field.String("ref").Optional().Nillable().
			Comment("The ref the whole result is stored under (readToolResult reads it); null when nothing was stored: refused, never ran, or still pending."),
		field.String("guardrail").Optional().Nillable().
			Comment("null, or why what the model heard of the result was flagged as instruction-like"),
		field.String("arguments_ref").Optional().Nillable().
			Comment("the ref arguments too long to replay whole are stored under, readable like a result"),
		field.Int("result_id").Optional().Nillable().Annotations(entgql.Skip()),
		field.Time("started_at").Default(time.Now).Immutable().
			Comment("When the runtime took up the call."),
		field.Time("finished_at").Optional().Nillable().
			Comment("When its outcome was recorded; null while the outcome is PENDING."),
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
