// Package schematype holds the value types stored in JSON and enum fields of
// the data model. They live apart from ent/schema so that code reading or
// writing them (the runtime, the tools) does not pull in the schema's code
// generator, as entgql's todo example keeps its own in schematype.
package schematype

import (
	"fmt"
	"io"
	"strconv"
)

// ResultKind is how a tool result's content is encoded: the one kind the
// dispatcher, the previews, the MCP client and the stored results share.
type ResultKind string

// The kinds of content.
const (
	// KindText is plain text.
	KindText ResultKind = "TEXT"
	// KindJSON is a JSON value.
	KindJSON ResultKind = "JSON"
	// KindMedia is content the model cannot read as text (images, audio,
	// blobs), kept as it came.
	KindMedia ResultKind = "MEDIA"
)

// Values lists the kinds, for ent's enum field.
func (ResultKind) Values() []string {
	return []string{string(KindText), string(KindJSON), string(KindMedia)}
}

// String returns the kind's name.
func (k ResultKind) String() string { return string(k) }

// MarshalGQL writes the kind as a GraphQL enum value.
func (k ResultKind) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(k)))
}

// UnmarshalGQL reads a GraphQL enum value.
func (k *ResultKind) UnmarshalGQL(v any) error {
	return unmarshalEnum(k, v, "result kind", "not one of TEXT, JSON, MEDIA")
}

// unmarshalEnum reads v, a GraphQL enum value, into e when it is one of
// e's values; what names the enum in the error, and unknown says why a
// string that is not one of them is refused.
func unmarshalEnum[E interface {
	~string
	Values() []string
}](e *E, v any, what, unknown string) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s %v: want a string", what, v)
	}
	for _, want := range (*e).Values() {
		if s == want {
			*e = E(s)
			return nil
		}
	}
	return fmt.Errorf("%s %q: %s", what, s, unknown)
}

// FailureKind says what became of one failed item of a many-item call.
type FailureKind string

// The kinds of item failure (CONTRACT.md).
const (
	// FailureAbsence: the item ran and matched nothing.
	FailureAbsence FailureKind = "ABSENCE"
	// FailureOutage: the item never ran (its backend was down or busy).
	FailureOutage FailureKind = "OUTAGE"
	// FailureError: the item ran and failed.
	FailureError FailureKind = "ERROR"
	// FailureRefused: the item was refused before anything ran (a ref or id
	// not found, over a limit).
	FailureRefused FailureKind = "REFUSED"
)

// Values lists the kinds.
func (FailureKind) Values() []string {
	return []string{string(FailureAbsence), string(FailureOutage), string(FailureError), string(FailureRefused)}
}

// MarshalGQL writes the kind as a GraphQL enum value.
func (k FailureKind) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(k.Or())))
}

// UnmarshalGQL reads a GraphQL enum value.
func (k *FailureKind) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("failure kind %v: want a string", v)
	}
	for _, want := range k.Values() {
		if s == want {
			*k = FailureKind(s)
			return nil
		}
	}
	return fmt.Errorf("failure kind %q: not one of ABSENCE, OUTAGE, ERROR, REFUSED", s)
}

// Or returns the kind, or ERROR for an item failure that named none (or an
// unknown one): "it failed" is all that is known of it.
func (k FailureKind) Or() FailureKind {
	switch k {
	case FailureAbsence, FailureOutage, FailureError, FailureRefused:
		return k
	}
	return FailureError
}

// ItemFailure is one failed item of a tool call that took several items
// (`queries: [a, b]`): which item, what became of it, and why.
type ItemFailure struct {
	// Item is the failed item's position in the call's list, from 0.
	Item int `json:"item"`
	// Input is what was asked for that item, as sent.
	Input string `json:"input,omitempty"`
	// Kind says whether the item ran and found nothing, never ran, or ran
	// and failed; empty (a backend that names none) reads as ERROR.
	Kind FailureKind `json:"kind,omitempty"`
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

// AgentConfig is what a turn took from its agent when it first ran: its
// instructions, tools and switches. A turn resumed after updateAgent (an
// answered clarification, a restart) keeps them, so a turn never changes
// tools or prompt halfway.
type AgentConfig struct {
	Instructions           string   `json:"instructions"`
	Tools                  []string `json:"tools"`
	Memory                 bool     `json:"memory"`
	BudgetCheck            bool     `json:"budgetCheck"`
	PastConversationSearch bool     `json:"pastConversationSearch"`
	Skills                 []string `json:"skills,omitempty"`
	// ToolLoading is the agent's tool_loading; empty in turns recorded
	// before it existed, which read as AUTO.
	ToolLoading string `json:"toolLoading,omitempty"`
	// Approvals are the agent's own approval rules (tightening its
	// applications'); empty in turns recorded before they existed.
	Approvals []ApprovalRule `json:"approvals,omitempty"`
}
