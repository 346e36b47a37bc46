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

// Approval is a tool call that waited for a person's decision before it
// could run: the call as it would be sent, the tool as the model was shown
// it, and, once given, the decision, who gave it and when. It is stored
// before anything of the call is sent, and the decision before the call
// runs.
type Approval struct {
	ent.Schema
}

// Fields of the Approval.
func (Approval) Fields() []ent.Field {
	return []ent.Field{
		field.Int("conversation_id").Immutable(),
		field.Int("turn_id").Immutable(),
		field.Int("tool_call_id").Immutable().Unique(),
		field.String("tool").Immutable().
			Comment("The tool's name, as the model called it (<application>__<tool>)."),
		field.Text("arguments").Immutable().
			Comment("The call's arguments as the model asked for them, repaired to the tool's schema: exactly what would be sent on approval (JSON)."),
		field.Text("description").Default("").Immutable().
			Comment("The tool's description, as the model was shown it."),
		field.JSON("annotations", &schematype.ToolAnnotations{}).SchemaType(jsonColumn).Optional().Immutable().
			Comment("The hints the tool's server gives (readOnlyHint, destructiveHint, idempotentHint, openWorldHint); null when it gives none."),
		field.Text("input_schema").Default(`{"type":"object"}`).Immutable().
			Comment("the tool's JSON Schema, which edited arguments must fit"),
		field.Enum("policy").GoType(schematype.ApprovalPolicy("")).Immutable().
			Comment("The policy that made the call wait: WRITES (the tool may write) or ALWAYS."),
		field.Enum("decision").GoType(schematype.Decision("")).Optional().Nillable().
			Comment("What the person decided: APPROVE, EDIT or DECLINE; null while the call waits."),
		field.Text("decided_arguments").Optional().Nillable().
			Comment("The arguments the call runs with after an EDIT, as checked against the tool's schema; null otherwise."),
		field.Text("reason").Optional().Nillable().
			Comment("Why the person declined, as they wrote it; \"no answer\" when nobody decided in time."),
		field.Int("decided_by_id").Optional().Nillable(),
		field.Time("decided_at").Optional().Nillable().
			Comment("When the decision was stored."),
		field.Bool("timed_out").Default(false).
			Comment("Whether nobody decided in time, so the call was declined as \"no answer\"."),
		field.Time("expires_at").
			Comment("When the call is declined as \"no answer\" if nobody has decided."),
		field.Time("dispatched_at").Optional().Nillable().
			Comment("when the runtime took up the approved call to send it: a run resumed after it treats the call as in flight"),
		field.Time("created_at").Default(time.Now).Immutable().
			Comment("When the call began to wait."),
	}
}

// Edges of the Approval.
func (Approval) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("conversation", Conversation.Type).Field("conversation_id").Unique().Required().Immutable(),
		edge.To("turn", Turn.Type).Field("turn_id").Unique().Required().Immutable(),
		edge.To("tool_call", ToolCall.Type).Field("tool_call_id").Unique().Required().Immutable(),
		edge.To("decided_by", User.Type).Field("decided_by_id").Unique(),
	}
}

// Indexes of the Approval.
func (Approval) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("turn_id"),
		// the calls waiting past their time (the runner's sweep)
		index.Fields("expires_at"),
	}
}

// Annotations of the Approval.
func (Approval) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Approval.
func (Approval) Mixin() []ent.Mixin {
	return []ent.Mixin{Scope(tenancy.InConversation("conversation_id"))}
}
