package catalog

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// The limits of the discovery tools.
const (
	// MaxQueries is the most distinct search_tools queries one call may ask.
	MaxQueries = 5
	// MaxNames is the most distinct names one get_tool_schema call may ask
	// for: enough for a batch, small enough that an answer stays readable.
	MaxNames = 20
	// MaxDescription is the longest description search_tools and
	// list_tools give; get_tool_schema gives descriptions whole.
	MaxDescription = 200
	// SchemaTool is the name of get_tool_schema, which a turn that defers
	// definitions is always given.
	SchemaTool = tools.SchemaTool
)

// Definitions are the discovery tools. Agents that list them get them; their
// answers pass to the model unpreviewed, so every name survives.
var Definitions = []tools.Definition{
	{
		Name:   "search_tools",
		Brief:  "Find tools you may use by words in their names and descriptions.",
		Family: Family,
		Description: "Find tools you may use by words in their names and descriptions: up to 5 distinct queries, " +
			"answered in order. Don't call it for tools already in your list, or to learn arguments " +
			"(get_tool_schema).",
		Schema: json.RawMessage(`{"type":"object","properties":{"queries":{"type":"array","items":{"type":"string"},"minItems":1}},` +
			`"required":["queries"],"additionalProperties":false}`),
		Offered: tools.OfferAllowlisted,
		Effect:  tools.EffectRead,
		Preview: tools.PreviewExempt,
		// Tools' names and definitions: workflow, never evidence.
		Evidence: tools.EvidenceNone,
		Limits:   map[string]int{"queries": MaxQueries, "descriptionChars": MaxDescription},
		Operation: `query SearchTools($conversationId: ID, $queries: [String!]!) {
  searchTools(conversationId: $conversationId, queries: $queries) {
    results { query tools { name description } } note failures { item input kind message }
  }
}`,
		Field:  "searchTools",
		Absent: NothingFound,
	},
	{
		Name:   "list_tools",
		Brief:  "List every tool you may use, with short descriptions.",
		Family: Family,
		Description: "List every tool you may use, with short descriptions. Don't call it when search_tools with a " +
			"few words would do, or more than once a conversation.",
		Schema:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Offered: tools.OfferAllowlisted,
		Effect:  tools.EffectRead,
		Preview: tools.PreviewExempt,
		// Tools' names and definitions: workflow, never evidence.
		Evidence: tools.EvidenceNone,
		Limits:   map[string]int{"descriptionChars": MaxDescription},
		Operation: `query ListTools($conversationId: ID) {
  listTools(conversationId: $conversationId) { tools { name description } }
}`,
		Field: "listTools",
	},
	{
		Name:   SchemaTool,
		Family: Family,
		Description: "Get tools whole by name: full description and argument schema. Don't call it with guessed names " +
			"(use search_tools), or for a tool whose arguments you already know.",
		Schema: json.RawMessage(`{"type":"object","properties":{"names":{"type":"array","items":{"type":"string"},"minItems":1}},` +
			`"required":["names"],"additionalProperties":false}`),
		Offered: tools.OfferAllowlisted,
		Effect:  tools.EffectRead,
		Preview: tools.PreviewExempt,
		// Tools' names and definitions: workflow, never evidence.
		Evidence: tools.EvidenceNone,
		Limits:   map[string]int{"names": MaxNames},
		Operation: `query GetToolSchema($conversationId: ID, $names: [String!]!) {
  getToolSchema(conversationId: $conversationId, names: $names) {
    tools { name description parameters } missing hint failures { item input kind message }
  }
}`,
		Field: "getToolSchema",
	},
}
