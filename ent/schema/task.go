package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/toolgate/toolgate/ent/tenancy"
)

// Task is one item of a conversation's task list, the list update_tasks
// replaces whole.
type Task struct {
	ent.Schema
}

// Fields of the Task.
func (Task) Fields() []ent.Field {
	return []ent.Field{
		field.Int("conversation_id").Immutable(),
		field.Int("position").Immutable().NonNegative(),
		// update_tasks bounds titles in characters; MaxLen would count bytes.
		field.String("title").NotEmpty(),
		field.Enum("status").Values("pending", "in_progress", "done").Default("pending"),
	}
}

// Indexes of the Task.
func (Task) Indexes() []ent.Index {
	return []ent.Index{index.Fields("conversation_id", "position").Unique()}
}

// Mixin of the Task.
func (Task) Mixin() []ent.Mixin {
	return []ent.Mixin{TimeMixin{}, Scope(tenancy.InConversation("conversation_id"))}
}

// Annotations of the Task. The GraphQL type is written by hand
// (assist.graphqls): a task is read only through its conversation, which
// is scoped, so it is not a Node that node(id) could reach unscoped.
func (Task) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
