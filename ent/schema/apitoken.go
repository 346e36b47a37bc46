package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// APIToken lets a user call the API. Only a hash of the secret is kept: the
// token is shown once, when it is made.
type APIToken struct {
	ent.Schema
}

// Fields of the APIToken.
func (APIToken) Fields() []ent.Field {
	return []ent.Field{
		field.Int("user_id").Immutable().Annotations(entgql.Skip()),
		field.String("name").Default("").MaxLen(200).
			Comment("A label the owner chose to tell their tokens apart; empty when none was given. At most 200 characters."),
		field.Bytes("hash").Unique().Immutable().Sensitive().
			Annotations(entgql.Skip()).
			Comment("SHA-256 of the whole token"),
		field.String("hint").Immutable().
			Comment("the token's first characters, to tell tokens apart"),
		field.Time("revoked_at").Optional().Nillable().
			Comment("When the token was revoked; null while it has not been. A revoked token is refused at once, like one that never existed."),
		field.Time("last_used_at").Optional().Nillable().
			Comment("when the token last authenticated a request, to the minute"),
		field.Time("expires_at").Optional().Nillable().Immutable().
			Comment("after this the token is refused like a revoked one; none: it does not expire"),
	}
}

// Edges of the APIToken.
func (APIToken) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("user", User.Type).
			Ref("tokens").Field("user_id").Unique().Required().Immutable(),
	}
}

// Mixin of the APIToken.
func (APIToken) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.UserOf())}
}

// Annotations of the APIToken.
func (APIToken) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Type("APIToken"), entgql.Skip(entgql.SkipWhereInput, entgql.SkipOrderField)}
}
