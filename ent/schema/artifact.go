package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// Artifact is a document a conversation produces (an HTML page or slide
// deck, an SVG drawing, a Markdown text), kept as numbered versions that
// are never overwritten: create_artifact writes version 1, and every
// rewrite or update adds the next.
//
// The conversation is a plain column, like a workspace file's: the
// artifact package filters every query by the conversation the resolver
// already checked. The GraphQL type is written by hand (artifact.graphqls),
// read through its conversation, so node(id) never reaches it.
type Artifact struct {
	ent.Schema
}

// Fields of the Artifact.
func (Artifact) Fields() []ent.Field {
	return []ent.Field{
		field.Int("conversation_id").Immutable(),
		// Bounded in characters by the artifact package; MaxLen would count bytes.
		field.String("title").NotEmpty(),
		field.Enum("kind").Values("html", "svg", "markdown").Immutable(),
		field.Int("versions_count").Default(0).NonNegative().
			Comment("the number of the latest version"),
	}
}

// Edges of the Artifact.
func (Artifact) Edges() []ent.Edge {
	return []ent.Edge{edge.To("versions", ArtifactVersion.Type)}
}

// Indexes of the Artifact.
func (Artifact) Indexes() []ent.Index {
	return []ent.Index{index.Fields("conversation_id")}
}

// Mixin of the Artifact.
func (Artifact) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.InConversation("conversation_id"))}
}

// Annotations of the Artifact.
func (Artifact) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// ArtifactVersion is one version of an artifact, written once. A version
// of a visual kind (html, svg) is a draft until inspect_artifact has
// rendered it; the portal shows an artifact's latest inspected version.
type ArtifactVersion struct {
	ent.Schema
}

// Fields of the ArtifactVersion.
func (ArtifactVersion) Fields() []ent.Field {
	return []ent.Field{
		field.Int("artifact_id").Immutable(),
		// Repeated from the artifact so that the scope rule reads one column.
		field.Int("conversation_id").Immutable(),
		field.Int("number").Immutable().Positive(),
		field.Text("content").Immutable(),
		field.Int64("chars").Immutable().NonNegative(),
		field.Bool("inspected").Default(false).
			Comment("inspect_artifact has rendered this version"),
		field.Time("created_at").Default(time.Now).Immutable(),
	}
}

// Edges of the ArtifactVersion.
func (ArtifactVersion) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("artifact", Artifact.Type).Ref("versions").Field("artifact_id").Unique().Required().Immutable(),
	}
}

// Indexes of the ArtifactVersion.
func (ArtifactVersion) Indexes() []ent.Index {
	return []ent.Index{index.Fields("artifact_id", "number").Unique()}
}

// Mixin of the ArtifactVersion.
func (ArtifactVersion) Mixin() []ent.Mixin {
	return []ent.Mixin{Scope(tenancy.InConversation("conversation_id"))}
}

// Annotations of the ArtifactVersion.
func (ArtifactVersion) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
