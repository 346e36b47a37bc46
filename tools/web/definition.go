package web

import (
	"encoding/json"
	"strconv"

	"github.com/toolgate/toolgate/tools"
)

// Family is the family's name in the catalogue.
const Family = "web"

// Definitions are research_web and read_page, in registration order.
var Definitions = []tools.Definition{
	{
		Name:   "research_web",
		Brief:  "Search the public web and read the best pages' main text.",
		Family: Family,
		Description: "Search the public web and read the best pages' main text (at most 3 pages in all, " + strconv.Itoa(PageChars) + " chars each); " +
			"up to 3 distinct angles in one call run at once. A query under failures with kind ABSENCE found nothing (rephrase it); " +
			"OUTAGE never ran. Don't call it once per angle, don't use it for this organisation's own documents or files or for what you " +
			"already know, don't re-search to read one known URL further (read_page does), and don't report an OUTAGE as nothing found.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			tools.QueriesSchema(MaxQueries, MaxQueryChars) + `,` +
			`"maxPages":{"type":"integer","minimum":0,"maximum":3,"description":"pages to read in all, default 2; 0: hits only"}},` +
			`"required":["queries"],"additionalProperties":false}`),
		Guidance:    guidance,
		GuidanceKey: "web",
		Offered:     tools.OfferWebProvider,
		Effect:      tools.EffectRead,
		Preview:     tools.PreviewLarge,
		Limits: map[string]int{
			"queries":      MaxQueries,
			"maxPages":     MaxPages,
			"defaultPages": DefaultPages,
			"hitsPerQuery": HitsPerQuery,
			"pageChars":    PageChars,
		},
		Operation: `query($conversationId: ID!, $queries: [String!]!, $maxPages: Int) {
  researchWeb(conversationId: $conversationId, queries: $queries, maxPages: $maxPages) {
    results { query hits { title url snippet } pages { url title text chars truncated nextOffset } }
    failures { item input kind message }
  }
}`,
		Field:  "researchWeb",
		Absent: absentResearch,
	},
	{
		Name:   "read_page",
		Brief:  "Read one public web page's main text.",
		Family: Family,
		Description: "Read one public web page's main text: " + strconv.Itoa(ReadDefaultChars) + " chars by default (at most " + strconv.Itoa(ReadMaxChars) + ") from offset; " +
			"a cut read gives nextOffset to continue. For a URL the user gave, or a hit worth reading further. " +
			"Don't use it to search (research_web does), don't guess URLs, and don't ask for private or internal addresses: they are refused.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"url":{"type":"string","minLength":1,"maxLength":2048},` +
			`"offset":{"type":"integer","minimum":0,"description":"nextOffset of a cut read"},` +
			`"maxChars":{"type":"integer","minimum":500,"maximum":10000,"description":"default 3000"}},` +
			`"required":["url"],"additionalProperties":false}`),
		Guidance:    guidance,
		GuidanceKey: "web",
		Offered:     tools.OfferWebProvider,
		Effect:      tools.EffectRead,
		// Not previewed: the read keeps to the window the model chose,
		// which ReadMaxChars bounds (and the title and address their own).
		Preview: tools.PreviewExempt,
		Limits: map[string]int{
			"defaultChars": ReadDefaultChars,
			"maxChars":     ReadMaxChars,
			"minChars":     ReadMinChars,
		},
		Operation: `query($conversationId: ID!, $url: String!, $offset: Int, $maxChars: Int) {
  readPage(conversationId: $conversationId, url: $url, offset: $offset, maxChars: $maxChars) {
    url title text offset chars truncated nextOffset
  }
}`,
		Field: "readPage",
	},
}

// guidance is shared by both tools; that page text is material, not
// instruction, the runtime's own notice already says once.
const guidance = "Cite what you take from a web page with its URL."

// absentResearch: a research call gave no hits when no query found one.
// What it was then is for its failures to say, query by query: an
// absence, an outage or an error, as for every search tool.
var absentResearch = tools.NothingFound("hits")
