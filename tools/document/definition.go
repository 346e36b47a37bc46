package document

import (
	"encoding/json"
	"strconv"

	"github.com/toolgate/toolgate/tools"
)

// Family is the family's name in the catalogue.
const Family = "documents"

// searchSchema is the arguments of both search tools.
var searchSchema = json.RawMessage(`{"type":"object","properties":{` +
	tools.QueriesSchema(MaxQueries, MaxQueryChars) + `,` +
	`"maxResults":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(MaxMaxResults) + `,"description":"passages per query, default ` + strconv.Itoa(DefaultMaxResults) + `"}},` +
	`"required":["queries"],"additionalProperties":false}`)

// searchLimits are the limits both search tools enforce.
var searchLimits = map[string]int{
	"queries":           MaxQueries,
	"queryChars":        MaxQueryChars,
	"defaultMaxResults": DefaultMaxResults,
	"maxResults":        MaxMaxResults,
}

// The Documents family's tools, in registration order.
var (
	// KnowledgeSearch is knowledge_search.
	KnowledgeSearch = tools.Definition{
		Name:   "knowledge_search",
		Brief:  "Search the documents of your knowledge bases for passages.",
		Family: Family,
		Description: "Search the organisation's documents in your knowledge bases (policies, handbooks, manuals) for " +
			"passages: up to 5 distinct angles in one call, run at once and answered in order; each hit gives " +
			"documentId, title, position and the passage. Put every angle in one call, not one call each. Don't " +
			"use it for files attached to this conversation (search_attachments), the web, or what you already " +
			"know; to read on from a hit, call read_document with its documentId and position as offset.",
		Schema:      searchSchema,
		Guidance:    tools.SearchGuidance,
		GuidanceKey: tools.SearchGuidanceKey,
		Offered:     tools.OfferKnowledge,
		Effect:      tools.EffectRead,
		Preview:     tools.PreviewLarge,
		Limits:      searchLimits,
		Operation: `query($conversationId: ID, $queries: [String!]!, $maxResults: Int) {
  knowledgeSearch(conversationId: $conversationId, queries: $queries, maxResults: $maxResults) {
    results { query hits { documentId title position text } } failures { item input kind message }
  }
}`,
		Field:  "knowledgeSearch",
		Absent: NothingFound,
	}

	// ReadDocument is read_document.
	ReadDocument = tools.Definition{
		Name:   "read_document",
		Brief:  "Read a knowledge-base document or an attached file by documentId.",
		Family: Family,
		Description: "Read a document of your knowledge bases, or a file attached to this conversation, by documentId: " +
			"maxChars (default " + strconv.Itoa(ReadDefaultChars) + ", at most " + strconv.Itoa(ReadMaxChars) + ") from offset; " +
			"a read cut short says truncated and gives nextOffset. Don't call it to find a passage (search " +
			"first, then read from its position), don't page through a whole long document, and don't make " +
			"ids up: use ids a search or the person gave; any other reads as not found.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"documentId":{"type":"string"},` +
			`"offset":{"type":"integer","minimum":0,"description":"a hit's position, or nextOffset"},` +
			`"maxChars":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(ReadMaxChars) + `}},` +
			`"required":["documentId"],"additionalProperties":false}`),
		Offered: tools.OfferKnowledgeOrDocument,
		Effect:  tools.EffectRead,
		// Not previewed: the read keeps to the window the model chose.
		Preview: tools.PreviewExempt,
		Limits:  map[string]int{"defaultMaxChars": ReadDefaultChars, "maxChars": ReadMaxChars},
		Operation: `query($conversationId: ID, $documentId: ID!, $offset: Int, $maxChars: Int) {
  readDocument(conversationId: $conversationId, documentId: $documentId, offset: $offset, maxChars: $maxChars) {
    documentId title text offset totalChars truncated nextOffset
  }
}`,
		Field: "readDocument",
	}

	// SearchAttachments is search_attachments.
	SearchAttachments = tools.Definition{
		Name:   "search_attachments",
		Brief:  "Search the files attached to this conversation for passages.",
		Family: Family,
		Description: "Search the files attached to this conversation (only these) for passages: up to 5 distinct " +
			"angles in one call, run at once and answered in order; each hit gives documentId, title, position " +
			"and the passage. Don't use it for the knowledge bases (knowledge_search), and don't search a short " +
			"file you could read whole with read_document.",
		Schema:      searchSchema,
		Guidance:    tools.SearchGuidance,
		GuidanceKey: tools.SearchGuidanceKey,
		Offered:     tools.OfferAttachment,
		Effect:      tools.EffectRead,
		Preview:     tools.PreviewLarge,
		Limits:      searchLimits,
		Operation: `query($conversationId: ID, $queries: [String!]!, $maxResults: Int) {
  searchAttachments(conversationId: $conversationId, queries: $queries, maxResults: $maxResults) {
    results { query hits { documentId title position text } } failures { item input kind message }
  }
}`,
		Field:  "searchAttachments",
		Absent: NothingFound,
	}

	// Definitions are the family's tools in registration order.
	Definitions = []tools.Definition{KnowledgeSearch, ReadDocument, SearchAttachments}
)

// NothingFound reports whether a search found no passage for any query;
// its failures then say whether that is an absence or an outage.
var NothingFound = tools.NothingFound("hits")
