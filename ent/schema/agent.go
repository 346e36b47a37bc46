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
			Annotations(entgql.OrderField("NAME")),
		field.Text("instructions").Default("").MaxLen(100_000),
		field.Strings("tools").Default([]string{}).
			Comment("allowlist of optional tools; none declared means none offered"),
		field.Bool("memory").Default(false),
		field.Bool("budget_check").Default(false),
		field.Bool("past_conversation_search").Default(false),
		field.Strings("skills").Default([]string{}).
			Comment("the names of the organisation's published skills the agent may load (load_skill)"),
		field.Ints("knowledge_base_ids").Default([]int{}).Annotations(entgql.Skip()).
			Comment("the knowledge bases knowledge_search and read_document reach"),
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
	return []schema.Annotation{entgql.RelayConnection(), entgql.MultiOrder(), entgql.Skip(entgql.SkipWhereInput)}
}
