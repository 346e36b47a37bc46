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

// Application is an MCP server (Streamable HTTP) registered for an
// organisation. Its allowed tools are offered as `<name>__<tool>`.
type Application struct {
	ent.Schema
}

// Fields of the Application.
func (Application) Fields() []ent.Field {
	return []ent.Field{
		field.Int("organization_id").Immutable().Annotations(entgql.Skip()),
		field.String("name").NotEmpty().MaxLen(40).
			Comment("The name its tools are offered under, as <name>__<tool>; unique within the organisation, at most 40 characters."),
		field.String("url").NotEmpty().MaxLen(2000).
			Comment("The MCP server's endpoint (Streamable HTTP), as registered."),
		field.Strings("allowed_tools").SchemaType(jsonColumn).Default([]string{}).
			Comment("The server's tools, by the server's own names, that agents may be offered; a tool not listed is never offered or called."),
		field.JSON("approvals", []schematype.ApprovalRule{}).SchemaType(jsonColumn).Default([]schematype.ApprovalRule{}).
			Annotations(entgql.Skip()).
			Comment("per tool (the server's own name), when its calls wait for a person's decision; the others follow default_approval"),
		field.Enum("default_approval").GoType(schematype.ApprovalPolicy("")).Default(string(schematype.ApprovalNever)).
			Annotations(entgql.Skip()).
			Comment("the policy of the tools approvals does not name; NEVER by default, as applications registered before approvals ran"),
	}
}

// Edges of the Application.
func (Application) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("organization", Organization.Type).
			Ref("applications").Field("organization_id").Unique().Required().Immutable().
			Annotations(entgql.Skip()),
	}
}

// Indexes of the Application.
func (Application) Indexes() []ent.Index {
	return []ent.Index{index.Fields("organization_id", "name").Unique()}
}

// Annotations of the Application.
func (Application) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipWhereInput, entgql.SkipOrderField)}
}

// Mixin of the Application.
func (Application) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.Organization())}
}
