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

// User is a person in an organisation. The model is told their name,
// department and organisation, never an identifier.
type User struct {
	ent.Schema
}

// Fields of the User.
func (User) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable().Annotations(entgql.Skip()),
		field.String("name").NotEmpty().MaxLen(200).
			Comment("The person's name; at most 200 characters."),
		field.String("department").Default("").MaxLen(200).
			Comment("The person's department, as given at creation; empty when none. At most 200 characters."),
		field.Bool("admin").Default(false).
			Comment("admins reach every conversation of their organisation"),
		field.Time("deactivated_at").Optional().Nillable().
			Comment("when an admin deactivated the user: their API tokens stop working at once; none: active"),
		// A person who signs in through an OpenID Connect issuer is known
		// by the issuer and its subject, never by name: names change and
		// two people may share one.
		field.String("oidc_issuer").Optional().Nillable().Immutable().MaxLen(500).Annotations(entgql.Skip()).
			Comment("the OpenID Connect issuer the user signs in through; none: API tokens only"),
		field.String("oidc_subject").Optional().Nillable().Immutable().MaxLen(500).Annotations(entgql.Skip()).
			Comment("the user's subject (sub claim) at that issuer"),
	}
}

// Edges of the User.
func (User) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("organization", Organization.Type).
			Ref("users").Field("organization_id").Unique().Required().Immutable(),
		edge.To("tokens", APIToken.Type).Annotations(entgql.Skip()),
		edge.To("conversations", Conversation.Type).Annotations(entgql.Skip()),
	}
}

// Indexes of the User.
func (User) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("organization_id", "name").Unique(),
		index.Fields("oidc_issuer", "oidc_subject").Unique(),
	}
}

// Annotations of the User.
func (User) Annotations() []schema.Annotation {
	// A where input, so turns and conversations filter by who (through
	// hasConversationWith / hasUserWith); no order fields.
	return []schema.Annotation{entgql.Skip(entgql.SkipOrderField)}
}

// Mixin of the User.
func (User) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.Organization())}
}
