package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// Conversation is a thread between one user and one agent.
type Conversation struct {
	ent.Schema
}

// Fields of the Conversation.
func (Conversation) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable().Annotations(entgql.Skip()),
		field.Int("user_id").Immutable().Annotations(entgql.Skip()),
		field.Int("agent_id").Immutable().Annotations(entgql.Skip()),
		field.String("title").Optional().Nillable().MaxLen(500).
			Annotations(entgql.OrderField("TITLE")).
			Comment("The title given at startConversation; null when none was given. At most 500 characters."),
		// Kept by Turn's hook rather than counted at read time: ordering by
		// a LEFT JOIN count gives NULL for a conversation without turns,
		// which neither driver can page past.
		field.Int("turns_count").Default(0).NonNegative().
			Annotations(entgql.OrderField("TURNS_COUNT"), entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)).
			Comment("how many turns the conversation has"),
		field.Time("archived_at").Optional().Nillable().
			Comment("when the conversation was archived (read-only: no new turns); none: it is active"),
	}
}

// Edges of the Conversation.
func (Conversation) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("organization", Organization.Type).
			Ref("conversations").Field("organization_id").Unique().Required().Immutable().
			Annotations(entgql.Skip()),
		edge.From("user", User.Type).
			Ref("conversations").Field("user_id").Unique().Required().Immutable(),
		edge.From("agent", Agent.Type).
			Ref("conversations").Field("agent_id").Unique().Required().Immutable(),
		edge.To("turns", Turn.Type).
			Annotations(entgql.RelayConnection()),
		edge.To("results", StoredResult.Type).Annotations(entgql.Skip()),
		edge.To("summaries", Summary.Type).Annotations(entgql.Skip()),
	}
}

// Indexes of the Conversation.
func (Conversation) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("user_id", "updated_at"),
		index.Fields("organization_id", "updated_at"),
	}
}

// Mixin of the Conversation.
func (Conversation) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.Conversation())}
}

// Annotations of the Conversation.
func (Conversation) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
		entgql.QueryField(),
		entgql.MultiOrder(),
	}
}
