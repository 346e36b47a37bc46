package budget

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// Family is the family's name in the catalogue.
const Family = "budget"

// Check is budget_check: what the person and the organisation have spent
// this calendar month (UTC) and what is left of their limits.
var Check = tools.Definition{
	Name:   "budget_check",
	Brief:  "See this month's model spend and what is left of the limits.",
	Family: Family,
	Description: "See this calendar month's (UTC) model spend in USD and what is left of the monthly limits: yours and your " +
		"organisation's (no limit: left is null). Call it before costly work the user asks about, or when asked about cost. " +
		"Don't call it more than once a turn.",
	Schema:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
	Offered: tools.OfferBudgetSwitch,
	Effect:  tools.EffectRead,
	Preview: tools.PreviewLarge,
	Operation: `query($conversationId: ID) {
  budgetCheck(conversationId: $conversationId) {
    month user { monthlyLimit spent left } organization { monthlyLimit spent left }
  }
}`,
	Field: "budgetCheck",
	// A status always says something: zero spent is an answer.
	Absent: func(json.RawMessage) bool { return false },
}
