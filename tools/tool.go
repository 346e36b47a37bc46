// Package tools holds what every tool family shares: the one definition type
// the runtime knows tools by. Each family lives in its own package below.
package tools

import "encoding/json"

// Effect says whether a call may be sent again after it may have reached the
// backend. Retries are decided by it, never by the HTTP verb.
type Effect string

// The effects a tool can declare.
const (
	// EffectRead calls are safe to repeat.
	EffectRead Effect = "read"
	// EffectIdempotent calls are safe to repeat with the idempotency key the
	// runtime derives from the call id.
	EffectIdempotent Effect = "idempotent"
	// EffectWrite calls are never repeated once they may have reached the backend.
	EffectWrite Effect = "write"
)

// Offering says when a tool is offered to the model.
type Offering string

// The offering rules, checked at registration before the loop starts.
const (
	// OfferAlways tools are on every turn, whatever the agent declares.
	OfferAlways Offering = "always"
	// OfferWorkspace tools are on every turn: every conversation has a workspace.
	OfferWorkspace Offering = "workspace"
	// OfferAllowlisted tools are offered when the agent lists them.
	OfferAllowlisted Offering = "allowlisted"
	// OfferMemorySwitch tools need the agent's memory switch.
	OfferMemorySwitch Offering = "memory"
	// OfferBudgetSwitch tools need the agent's budget-check switch.
	OfferBudgetSwitch Offering = "budget"
	// OfferPastConversationsSwitch tools need the agent's past-conversation search switch.
	OfferPastConversationsSwitch Offering = "past_conversations"
)

// Preview says how a tool's result enters the model's context.
type Preview string

// The preview policies.
const (
	// PreviewLarge results are stored whole and previewed when too large.
	PreviewLarge Preview = "large"
	// PreviewExempt results pass as they are (skill instructions,
	// clarification control flow, acknowledgements, catalogue results).
	PreviewExempt Preview = "exempt"
)

// Definition is everything the runtime knows about a tool. Families declare
// theirs next to their logic; the runtime never names a tool in its rules.
type Definition struct {
	// Name is the model-facing name, e.g. "read_tool_result".
	Name string
	// Family is the package the tool belongs to, e.g. "result".
	Family string
	// Description is what the model reads about the tool.
	Description string
	// Schema is the JSON Schema of the tool's arguments.
	Schema json.RawMessage
	// Guidance is a paragraph for the system prompt; tools that share
	// GuidanceKey share one paragraph, collected once.
	Guidance    string
	GuidanceKey string
	// Offered says when the tool is on the list.
	Offered Offering
	// Effect decides retries.
	Effect Effect
	// Preview decides whether a large result is previewed.
	Preview Preview
	// Limits are the numeric ceilings the resolver enforces, by name, for
	// display in the catalogue and in refusals.
	Limits map[string]int
}

// AlwaysOn reports whether every turn pays for the tool's definition.
func (d Definition) AlwaysOn() bool {
	return d.Offered == OfferAlways || d.Offered == OfferWorkspace
}
