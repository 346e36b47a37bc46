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

// Agent is a configured assistant: instructions, the tools it may be
// offered, and its switches.
type Agent struct {
	ent.Schema
}

// Fields of the Agent.
func (Agent) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable().Annotations(entgql.Skip()),
		field.String("name").NotEmpty().MaxLen(200).
			Annotations(entgql.OrderField("NAME")).
			Comment("The agent's name, as people pick it; at most 200 characters."),
		field.Text("instructions").Default("").MaxLen(100_000).
			Comment("The agent's own instructions, given to the model at the start of every turn after toolgate's; empty: none. At most 100,000 characters."),
		field.Strings("tools").SchemaType(jsonColumn).Default([]string{}).
			Comment("allowlist of optional tools; none declared means none offered"),
		field.Bool("memory").Default(false).
			Comment("Offers memory_write, memory_search and memory_forget, when an embedding model is configured: the assistant may remember facts about the person it talks to."),
		field.Bool("budget_check").Default(false).
			Comment("Offers budget_check: the model may read this month's spend (UTC, USD) against the person's and the organisation's limits."),
		field.Bool("past_conversation_search").Default(false).
			Comment("Offers search_past_conversations: the model may search what the person wrote in their other conversations."),
		field.Strings("skills").SchemaType(jsonColumn).Default([]string{}).
			Comment("the names of the organisation's published skills the agent may load (load_skill)"),
		field.Enum("tool_loading").Values("AUTO", "FULL", "DEFERRED").Default("AUTO").
			Comment("How the agent's turns send tool definitions. FULL: every offered definition whole, on every model call. DEFERRED: the always-on tools and get_tool_schema whole, every other tool by name and a line, read whole with get_tool_schema before its first call. AUTO (the default): DEFERRED once the offered definitions pass 6,000 tokens, which only application tools reach; else FULL."),
		field.JSON("approvals", []schematype.ApprovalRule{}).SchemaType(jsonColumn).Default([]schematype.ApprovalRule{}).
			Annotations(entgql.Skip()).
			Comment("the agent's own approval rules, by the names the model sees: they tighten its applications' policies, never loosen them"),
		field.Ints("knowledge_base_ids").SchemaType(jsonColumn).Default([]int{}).Annotations(entgql.Skip()).
			Comment("the knowledge bases knowledge_search and read_document reach"),
		field.Time("archived_at").Optional().Nillable().
			Comment("When an admin archived the agent: no new conversation starts with it, and its conversations stay readable; none: in use."),
	}
}

// Edges of the Agent.
func (Agent) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("organization", Organization.Type).
			Ref("agents").Field("organization_id").Unique().Required().Immutable().
			Annotations(entgql.Skip()),
		edge.To("conversations", Conversation.Type).Annotations(entgql.Skip()),
	}
}

// Indexes of the Agent.
func (Agent) Indexes() []ent.Index {
	return []ent.Index{index.Fields("organization_id", "name")}
}

// Mixin of the Agent.
func (Agent) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.Organization())}
}

// Annotations of the Agent.
func (Agent) Annotations() []schema.Annotation {
	// A where input, so turns and conversations filter by agent (through
	// hasConversationWith / hasAgentWith).
	return []schema.Annotation{entgql.RelayConnection(), entgql.MultiOrder()}
}
