// Package schema is toolgate's data model. The rest of package ent is
// generated from it by `make generate`.
package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/mixin"
)

// TimeMixin adds creation and update times to a type.
type TimeMixin struct {
	mixin.Schema
}

// Fields of the TimeMixin.
func (TimeMixin) Fields() []ent.Field {
	return []ent.Field{
		field.Time("created_at").
			Default(time.Now).
			Immutable().
			Annotations(entgql.OrderField("CREATED_AT")),
		field.Time("updated_at").
			Default(time.Now).
			UpdateDefault(time.Now).
			Annotations(entgql.OrderField("UPDATED_AT")),
	}
}

// ItemFailure is one failed item of a tool call that took several items
// (`queries: [a, b]`): which item and why.
type ItemFailure struct {
	// Item is the failed item's position in the call's list, from 0.
	Item int `json:"item"`
	// Input is what was asked for that item, as sent.
	Input string `json:"input,omitempty"`
	// Message says why it failed.
	Message string `json:"message"`
}

// Repair is one change argument repair made to a call before it was sent.
type Repair struct {
	// Rule names the repair rule that fired.
	Rule string `json:"rule"`
	// Path is the argument it fired on, e.g. "queries".
	Path string `json:"path"`
}

// Clarification is a question the model asked the user with clarify.
type Clarification struct {
	Question    string   `json:"question"`
	Options     []string `json:"options"`
	Recommended *string  `json:"recommended,omitempty"`
	// Answer is set once the user answers.
	Answer *string `json:"answer,omitempty"`
}

// Span is a byte range [Start, End) of a stored result that became visible
// to the model: only these count as evidence.
type Span struct {
	Ref   string `json:"ref"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}
