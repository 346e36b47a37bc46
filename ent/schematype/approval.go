package schematype

import (
	"fmt"
	"io"
	"strconv"
)

// ApprovalPolicy says when a tool's calls wait for a person's decision.
type ApprovalPolicy string

// The policies, from the loosest to the strictest.
const (
	// ApprovalNever: the tool's calls run without asking.
	ApprovalNever ApprovalPolicy = "NEVER"
	// ApprovalWrites: calls wait when the tool may write, by its
	// annotations: not read-only, or destructive.
	ApprovalWrites ApprovalPolicy = "WRITES"
	// ApprovalAlways: every call waits.
	ApprovalAlways ApprovalPolicy = "ALWAYS"
)

// Values lists the policies, for ent's enum fields.
func (ApprovalPolicy) Values() []string {
	return []string{string(ApprovalNever), string(ApprovalWrites), string(ApprovalAlways)}
}

// rank orders the policies by strictness; an unknown one ranks as NEVER.
func (p ApprovalPolicy) rank() int {
	switch p {
	case ApprovalWrites:
		return 1
	case ApprovalAlways:
		return 2
	}
	return 0
}

// Valid reports whether p is one of the policies.
func (p ApprovalPolicy) Valid() bool {
	return p == ApprovalNever || p == ApprovalWrites || p == ApprovalAlways
}

// Stricter returns the stricter of p and q: an agent may tighten its
// applications' policies, never loosen them.
func (p ApprovalPolicy) Stricter(q ApprovalPolicy) ApprovalPolicy {
	if q.rank() > p.rank() {
		return q
	}
	if !p.Valid() {
		return ApprovalNever
	}
	return p
}

// MarshalGQL writes the policy as a GraphQL enum value.
func (p ApprovalPolicy) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(p)))
}

// UnmarshalGQL reads a GraphQL enum value.
func (p *ApprovalPolicy) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok || !ApprovalPolicy(s).Valid() {
		return fmt.Errorf("approval policy %v: not one of NEVER, WRITES, ALWAYS", v)
	}
	*p = ApprovalPolicy(s)
	return nil
}

// ApprovalRule sets one tool's policy: on an application, by the server's
// own tool name; on an agent, by the name the model sees
// (<application>__<tool>).
type ApprovalRule struct {
	Tool   string         `json:"tool"`
	Policy ApprovalPolicy `json:"policy"`
}

// Decision is what a person decided of a call waiting for approval.
type Decision string

// The decisions.
const (
	// DecisionApprove runs the call as it stands.
	DecisionApprove Decision = "APPROVE"
	// DecisionEdit runs the call with the person's arguments.
	DecisionEdit Decision = "EDIT"
	// DecisionDecline never runs it; the model hears why.
	DecisionDecline Decision = "DECLINE"
)

// Values lists the decisions, for ent's enum fields.
func (Decision) Values() []string {
	return []string{string(DecisionApprove), string(DecisionEdit), string(DecisionDecline)}
}

// MarshalGQL writes the decision as a GraphQL enum value.
func (d Decision) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(d)))
}

// UnmarshalGQL reads a GraphQL enum value.
func (d *Decision) UnmarshalGQL(v any) error {
	s, _ := v.(string)
	switch Decision(s) {
	case DecisionApprove, DecisionEdit, DecisionDecline:
		*d = Decision(s)
		return nil
	}
	return fmt.Errorf("decision %v: not one of APPROVE, EDIT, DECLINE", v)
}

// ToolAnnotations are the hints an MCP server gives about a tool; a hint
// it did not give is nil.
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Writes reports whether a tool with these hints may write: it is not
// marked read-only, or it is marked destructive. No hints: it may.
func (a *ToolAnnotations) Writes() bool {
	if a == nil {
		return true
	}
	return a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.DestructiveHint != nil && *a.DestructiveHint
}
