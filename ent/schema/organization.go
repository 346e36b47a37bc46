package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// Organization is a tenant: everything a caller can reach belongs to one.
type Organization struct {
	ent.Schema
}

// Fields of the Organization.
func (Organization) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").NotEmpty().Unique().MaxLen(200).
			Comment("The organisation's name, unique on this server; at most 200 characters."),
		// The approved web provider, enabled by the organisation's admin:
		// research_web and read_page are offered only when it is on and
		// the server has a provider.
		field.Bool("web_research").Default(false).
			Comment("Whether research_web and read_page are offered to the organisation's agents; they also need the approved web provider configured on the server. Admins set it with updateOrganization."),
		// Rate limits of the organisation's people; none: the server's
		// defaults. Shown through Organization.rateLimits, set with
		// setRateLimits.
		field.Int("rate_requests_per_second").Optional().Nillable().Positive().Annotations(entgql.Skip()),
		field.Int("rate_turns_at_once").Optional().Nillable().Positive().Annotations(entgql.Skip()),
	}
}

// Edges of the Organization.
func (Organization) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("users", User.Type).Annotations(entgql.Skip()),
		edge.To("agents", Agent.Type).Annotations(entgql.Skip()),
		edge.To("applications", Application.Type).Annotations(entgql.Skip()),
		edge.To("conversations", Conversation.Type).Annotations(entgql.Skip()),
	}
}

// Annotations of the Organization.
func (Organization) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipWhereInput, entgql.SkipOrderField)}
}

// Mixin of the Organization.
func (Organization) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.OrganizationRow())}
}
