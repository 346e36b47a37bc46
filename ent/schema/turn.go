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

// Turn is one message from the user and everything the runtime did to
// answer it.
type Turn struct {
	ent.Schema
}

// Fields of the Turn.
func (Turn) Fields() []ent.Field {
	return []ent.Field{
		field.Int("conversation_id").Immutable().Annotations(entgql.Skip()),
		field.Int("number").Immutable().Positive().
			Annotations(entgql.OrderField("NUMBER")).
			Comment("The turn's place in its conversation, from 1, in the order messages were sent."),
		field.Time("started_at").Default(time.Now).Immutable().
			Annotations(entgql.OrderField("STARTED_AT")).
			Comment("When the message was sent."),
		field.Time("finished_at").Optional().Nillable().
			Comment("When the turn stopped: COMPLETED, FAILED or CANCELLED. Null while RUNNING, WAITING_FOR_CLARIFICATION or WAITING_FOR_APPROVAL."),
		field.String("time_zone").Default("UTC").Immutable().
			Comment("the IANA zone the browser reported; a resumed turn renders the same"),
		field.Text("user_text").Immutable().
			Comment("The person's message, as sent (bytes that are not UTF-8 read back as U+FFFD)."),
		field.Text("answer").Optional().Nillable().
			Comment("The assistant's answer; null until the turn completes, and when it failed or was cancelled before answering."),
		field.Text("thinking").Optional().Nillable().
			Annotations(entgql.Skip()).
			Comment("never returned by the API or any tool"),
		field.Enum("status").
			Values("RUNNING", "WAITING_FOR_CLARIFICATION", "WAITING_FOR_APPROVAL", "COMPLETED", "FAILED", "CANCELLED").
			Default("RUNNING").
			Annotations(entgql.Type("TurnStatus")).
			Comment("Where the turn stands: RUNNING until it is answered (COMPLETED), stops on an error (FAILED), is cancelled (CANCELLED) or waits for the person: for an answer (WAITING_FOR_CLARIFICATION) or a decision on calls that need approval (WAITING_FOR_APPROVAL)."),
		field.String("error").Optional().Nillable().
			Comment("Why the turn failed, in words a person can act on (never a database's or provider's raw error); null unless status is FAILED."),
		field.Strings("suggestions").SchemaType(jsonColumn).Default([]string{}).
			Comment("Messages the assistant suggests the person might send next (suggest_next_actions), in the order given; empty when none."),
		field.JSON("clarification", &schematype.Clarification{}).SchemaType(jsonColumn).Optional().
			Comment("the open question while the turn waits for an answer"),
		field.Time("heartbeat_at").Optional().Nillable().Annotations(entgql.Skip()).
			Comment("the last sign of life: the claiming runner's heartbeat, or when the turn was last queued; a stale one lets another resume it"),
		field.JSON("agent_config", &schematype.AgentConfig{}).SchemaType(jsonColumn).Optional().
			Annotations(entgql.Skip()).
			Comment("the agent's instructions, tools and switches when the turn first ran: a turn in progress keeps them"),
		field.String("claimed_by").Optional().Nillable().Annotations(entgql.Skip()).
			Comment("the runner that runs the turn; none while it waits for one"),
		field.String("trace_parent").Optional().Nillable().Annotations(entgql.Skip()).
			Comment("the W3C traceparent of the turn's last traced run: the next run links to it"),
		field.Bool("replayed").Default(false).
			Comment("answered by the replay provider, not a live model"),
		field.Bool("superseded").Default(false).
			Comment("True once regenerateTurn answered this turn's message again as a later turn: kept for the transcript, no longer the conversation's answer."),
	}
}

// Edges of the Turn.
func (Turn) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("conversation", Conversation.Type).
			Ref("turns").Field("conversation_id").Unique().Required().Immutable(),
		edge.To("tool_calls", ToolCall.Type).Annotations(entgql.Skip()),
		edge.To("ratings", TurnRating.Type).Annotations(entgql.Skip()),
		edge.To("model_calls", ModelCall.Type).Annotations(entgql.Skip()),
	}
}

// Indexes of the Turn.
func (Turn) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("conversation_id", "number").Unique(),
		// the latest turns across conversations (Query.turns)
		index.Fields("started_at"),
	}
}

// Annotations of the Turn.
func (Turn) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.QueryField(), entgql.MultiOrder()}
}

// Mixin of the Turn.
func (Turn) Mixin() []ent.Mixin {
	return []ent.Mixin{Scope(tenancy.InConversation("conversation_id"))}
}
