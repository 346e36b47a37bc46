package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/mixin"
)

// ContentMixin is what documents and attachments share: the uploaded file
// kept whole, the text extracted from it, and how processing went.
type ContentMixin struct {
	mixin.Schema
}

// Fields of the ContentMixin.
func (ContentMixin) Fields() []ent.Field {
	return []ent.Field{
		field.String("title").MaxLen(500).Default("").
			Comment("The title search hits and readDocument show: the one given with the text, or the file's name; at most 500 characters."),
		field.String("filename").MaxLen(500).Default("").
			Comment("The uploaded file's name, as sent; empty for text added without a file."),
		field.String("mime_type").MaxLen(200).Default("text/plain").
			Comment("The media type the text was extracted as (text/plain, text/markdown, text/html, application/pdf, …); text/plain for text added without a file."),
		field.Bytes("original").Optional().Annotations(entgql.Skip()).
			Comment("the uploaded bytes, kept as they came"),
		field.Text("text").Default("").Annotations(entgql.Skip()).
			Comment("the extracted text that chunks and read_document windows are cut from"),
		field.Enum("status").Values("PROCESSING", "READY", "FAILED").Default("PROCESSING").
			Comment("PROCESSING until the text is extracted and indexed, then READY (searchable) or FAILED (error says why)."),
		field.String("error").Optional().Nillable().MaxLen(1000).
			Comment("why processing failed, in words a person can act on"),
		field.Int("chars").Default(0).NonNegative().Comment("Unicode characters of the extracted text"),
		field.Int("chunks").Default(0).NonNegative().Comment("passages indexed for search"),
	}
}
