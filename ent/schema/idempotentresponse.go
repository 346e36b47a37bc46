package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// IdempotentResponse is the first answer to a mutation sent with an
// Idempotency-Key: a request repeated with the same key (the runtime
// retrying a call that may have reached the API, a client resending) gets
// this answer back and changes nothing. It is kept per organisation and
// scope, so a key means nothing outside the conversation (scope token) or
// user (API token) that sent it.
type IdempotentResponse struct {
	ent.Schema
}

// Fields of the IdempotentResponse.
func (IdempotentResponse) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable(),
		field.String("scope").Immutable().NotEmpty().
			Comment(`"conversation:<id>" for a turn's scope token, "user:<id>" for an API token`),
		field.String("key").Immutable().NotEmpty().MaxLen(255),
		field.String("field").Immutable().NotEmpty().
			Comment("the mutation's root field, by its response name"),
		field.String("request_hash").Immutable().
			Comment("SHA-256 of the operation and its variables: a key reused for another request is refused"),
		field.Bytes("response").Immutable().
			Comment("the field's answer as it was sent, JSON"),
	}
}

// Indexes of the IdempotentResponse.
func (IdempotentResponse) Indexes() []ent.Index {
	return []ent.Index{index.Fields("organization_id", "scope", "key", "field").Unique()}
}

// Mixin of the IdempotentResponse.
func (IdempotentResponse) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}}
}

// Annotations of the IdempotentResponse: internal to the API, never a
// GraphQL type.
func (IdempotentResponse) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
