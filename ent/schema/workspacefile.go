package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// WorkspaceFile is one file in a conversation's workspace, written and read
// by the workspace tools: text, or a binary file a tool produced (print_pdf's
// PDF), kept as its bytes with its media type.
//
// The conversation is a plain column, not an edge: the workspace package
// filters every query by the conversation the resolver already checked, and
// the type is kept out of the GraphQL schema (no node lookup reaches it).
type WorkspaceFile struct {
	ent.Schema
}

// Fields of the WorkspaceFile.
func (WorkspaceFile) Fields() []ent.Field {
	return []ent.Field{
		field.Int("conversation_id").Immutable(),
		field.String("path").Immutable().NotEmpty().
			Comment("normalised: relative, cleaned, at most 255 characters"),
		field.Text("content"),
		field.Int64("chars").NonNegative().
			Comment("Unicode characters in content"),
		field.Int64("bytes").NonNegative().
			Comment("UTF-8 bytes in content, or bytes of data, counted against the size limits"),
		field.String("media_type").Optional().
			Comment("set on a binary file only: the media type of data (application/pdf); content is then empty"),
		field.Bytes("data").Optional().
			Comment("a binary file's bytes"),
	}
}

// Indexes of the WorkspaceFile.
func (WorkspaceFile) Indexes() []ent.Index {
	return []ent.Index{index.Fields("conversation_id", "path").Unique()}
}

// Annotations of the WorkspaceFile.
func (WorkspaceFile) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the WorkspaceFile.
func (WorkspaceFile) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.InConversation("conversation_id"))}
}
