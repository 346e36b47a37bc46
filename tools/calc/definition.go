package calc

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// Definition is the calculator tool as the runtime offers it. It is on every
// turn, so its description is kept short: each character is paid on every
// model call.
var Definition = tools.Definition{
	Name:   "calculator",
	Family: "calc",
	Description: "Evaluate arithmetic exactly: + - * / % (remainder) ^ ( ), sqrt abs round floor ceil ln log10 " +
		"exp, sin cos tan (radians), min max, pi e; 12 significant digits. Use it for every sum, " +
		"percentage or rate rather than working it in your head. Don't pass words, units or dates: " +
		"numbers and operators only.",
	Schema: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},` +
		`"required":["expression"],"additionalProperties":false}`),
	Offered: tools.OfferAlways,
	Effect:  tools.EffectRead,
	Preview: tools.PreviewExempt,
	Operation: `query($conversationId: ID, $expression: String!) {
  calculate(conversationId: $conversationId, expression: $expression) { value }
}`,
	Field: "calculate",
}
