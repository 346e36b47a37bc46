//go:build ignore

package main

import (
	"log"
	"strings"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"github.com/vektah/gqlparser/v2/ast"
)

func main() {
	ex, err := entgql.NewExtension(
		entgql.WithConfigPath("./gqlgen.yml"),
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("./graph/ent.graphqls"),
		entgql.WithWhereInputs(true),
		entgql.WithNodeDescriptor(false),
		entgql.WithSchemaHook(describe),
	)
	if err != nil {
		log.Fatalf("create entgql extension: %v", err)
	}
	err = entc.Generate("./ent/schema", &gen.Config{
		Features: []gen.Feature{
			gen.FeatureIntercept,
			gen.FeaturePrivacy,
			gen.FeatureGlobalID,
			gen.FeatureVersionedMigration,
			gen.FeatureUpsert,
			gen.FeatureExecQuery,
		},
	}, entc.Extensions(ex))
	if err != nil {
		log.Fatalf("run ent codegen: %v", err)
	}
}

// describe gives the generated schema descriptions in our own words: each
// entity type and enum (in place of entgql's "… is enum for the field …"),
// each enum value, and the fields every connection, edge, order and filter
// share.
func describe(_ *gen.Graph, s *ast.Schema) error {
	defaultTurnOrder(s)
	for name, d := range s.Types {
		if text, ok := typeDescriptions[name]; ok {
			d.Description = text
		}
		if node, ok := strings.CutSuffix(name, "WhereInput"); ok && d.Kind == ast.InputObject {
			d.Description = "Filters " + node + "s: a " + node + " matches when every field given matches."
		}
		for _, v := range d.EnumValues {
			if text, ok := valueDescriptions[name+"."+v.Name]; ok {
				v.Description = text
			} else if strings.HasSuffix(name, "OrderField") && v.Description == "" {
				v.Description = "By " + strings.ToLower(strings.ReplaceAll(v.Name, "_", " ")) + "."
			}
		}
		for _, f := range d.Fields {
			if f.Description != "" {
				continue
			}
			if text, ok := fieldDescriptions[name+"."+f.Name]; ok {
				f.Description = text
				continue
			}
			if text, ok := timeFields[f.Name]; ok && d.Kind == ast.Object {
				f.Description = text
				continue
			}
			switch {
			case strings.HasSuffix(name, "Connection"):
				f.Description = connectionFields[f.Name]
			case strings.HasSuffix(name, "Edge"):
				f.Description = edgeFields[f.Name]
			case strings.HasSuffix(name, "Order") && d.Kind == ast.InputObject:
				f.Description = orderFields[f.Name]
			case strings.HasSuffix(name, "WhereInput"):
				f.Description = predicate(f.Name)
			}
		}
	}
	return nil
}

// defaultTurnOrder makes a conversation's turns ordered by number, oldest
// first, when orderBy is not given: as the contract says, and as ent would
// otherwise not (it orders by id). As the argument's default, the order
// reaches every reader of the arguments alike: the resolvers, ent's field
// collection and the transcript's hot path.
func defaultTurnOrder(s *ast.Schema) {
	c := s.Types["Conversation"]
	if c == nil {
		return
	}
	f := c.Fields.ForName("turns")
	if f == nil {
		return
	}
	if a := f.Arguments.ForName("orderBy"); a != nil {
		a.DefaultValue = &ast.Value{Kind: ast.ListValue, Children: ast.ChildValueList{{Value: &ast.Value{
			Kind: ast.ObjectValue, Children: ast.ChildValueList{{Name: "field", Value: &ast.Value{Kind: ast.EnumValue, Raw: "NUMBER"}}},
		}}}}
	}
}

var typeDescriptions = map[string]string{
	"APIToken":         "A token a person (or a script of theirs) calls the API with; its secret is shown once, at creation.",
	"Agent":            "An assistant: its instructions, the optional tools it may be offered, its switches and its bound knowledge.",
	"Application":      "A third-party MCP server (Streamable HTTP) registered by an organisation; its allowed tools are offered as <application>__<tool>.",
	"Attachment":       "A file attached to a conversation: its original bytes kept, its text extracted and indexed for search_attachments.",
	"Conversation":     "A conversation between a user and an agent: its turns, workspace files, tasks, attachments and summaries.",
	"Document":         "A document in a knowledge base: its original bytes kept, its text extracted, chunked and indexed.",
	"KnowledgeBase":    "A collection of documents an agent bound to it can search.",
	"Memory":           "A fact the assistant saved about a person (memory_write): theirs alone, to list and to forget.",
	"Organization":     "An organisation: its people, agents, applications, budgets and settings.",
	"StoredResult":     "A tool call's whole result, stored under a ref that read_tool_result and toolResults open.",
	"ToolCall":         "One call the model asked for in a turn, as repaired and sent, with its outcome.",
	"Turn":             "One message from the user and everything the runtime did to answer it.",
	"User":             "A person of an organisation.",
	"Query":            "What can be read.",
	"AttachmentStatus": "Where an attachment's processing stands.",
	"AgentToolLoading": "How an agent's turns send tool definitions.",
	"DocumentStatus":   "Where a document's processing stands.",
	"ResultKind":       "What a stored result holds.",
	"ToolOutcome":      "How a tool call ended.",
	"TurnStatus":       "Where a turn stands.",
}

// fieldDescriptions describe generated fields that have no comment to
// carry their words (ids and times of a mixin).
var fieldDescriptions = map[string]string{
	"Memory.id":               "The memory's id, as memory_forget and forgetMemory name it.",
	"Memory.createdAt":        "When it was saved.",
	"Memory.updatedAt":        "When it was saved: a memory is never changed, only forgotten.",
	"APIToken.id":             "The token's id (not its secret), as revokeAPIToken names it.",
	"APIToken.user":           "The person the token acts as.",
	"Agent.id":                "The agent's id, as startConversation, updateAgent and catalogue(agentId) name it.",
	"Application.id":          "The application's id, as updateApplication and removeApplication name it.",
	"Attachment.id":           "The attachment's id, as readDocument names it.",
	"Conversation.id":         "The conversation's id, as sendMessage, transcript and the conversation-scoped tools name it.",
	"Conversation.user":       "The person whose conversation it is.",
	"Conversation.agent":      "The agent that answers in the conversation; chosen at startConversation and never changed.",
	"Conversation.turns":      "The conversation's turns, by number (oldest first) unless orderBy says otherwise; page forward with first/after or backward with last/before (at most 100 a page).",
	"Document.id":             "The document's id, as readDocument names it.",
	"KnowledgeBase.id":        "The knowledge base's id, as addDocument and createAgent's knowledgeBaseIds name it.",
	"KnowledgeBase.documents": "The knowledge base's documents, oldest first unless orderBy says otherwise (a list of orders: the first decides, the next break ties); page forward with first/after or backward with last/before (at most 100 a page).",
	"Organization.id":         "The organisation's id.",
	"StoredResult.id":         "The stored result's id; clients read a result by its ref.",
	"ToolCall.id":             "The tool call's id.",
	"ToolCall.turn":           "The turn whose model asked for the call.",
	"Turn.id":                 "The turn's id, as answerClarification, cancelTurn and turnEvents name it.",
	"Turn.conversation":       "The conversation the turn belongs to.",
	"User.id":                 "The person's id, as setBudget and deactivateUser name it.",
	"User.organization":       "The organisation the person belongs to.",
	"Query.turns":             "The turns of the conversations the caller may read (an admin's: every turn of the organisation), newest first (by startedAt) unless orderBy says otherwise (a list of orders: the first decides, the next break ties); where filters them. Page forward with first/after or backward with last/before (at most 100 a page).",
	"Query.conversations":     "The caller's conversations (an admin's: every conversation of the organisation), most recently updated first unless orderBy says otherwise (a list of orders: the first decides, the next break ties); where filters them. Page forward with first/after or backward with last/before (at most 100 a page).",
}

// timeFields describe the times every entity of TimeMixin has, where
// fieldDescriptions says nothing more particular.
var timeFields = map[string]string{
	"createdAt": "When it was created (UTC).",
	"updatedAt": "When it was last changed (UTC); the time it was created if it never was.",
}

var valueDescriptions = map[string]string{
	"AgentToolLoading.AUTO":                "DEFERRED once the offered definitions pass 6,000 tokens (only application tools take an agent there); else FULL.",
	"AgentToolLoading.FULL":                "Every offered definition whole, on every model call.",
	"AgentToolLoading.DEFERRED":            "The always-on tools and get_tool_schema whole; every other tool by name and a line, read whole with get_tool_schema before its first call.",
	"AttachmentStatus.PROCESSING":          "Being extracted and indexed.",
	"AttachmentStatus.READY":               "Extracted and indexed: searchable.",
	"AttachmentStatus.FAILED":              "Could not be processed; error says why.",
	"DocumentStatus.PROCESSING":            "Being extracted, chunked and indexed.",
	"DocumentStatus.READY":                 "Extracted and indexed: searchable.",
	"DocumentStatus.FAILED":                "Could not be processed; error says why.",
	"ResultKind.TEXT":                      "Text.",
	"ResultKind.JSON":                      "A JSON document.",
	"ResultKind.MEDIA":                     "Non-text media (never previewed).",
	"ToolOutcome.PENDING":                  "Asked for, not finished yet.",
	"ToolOutcome.HITS":                     "Ran and found something.",
	"ToolOutcome.ABSENCE":                  "Ran and matched nothing.",
	"ToolOutcome.OUTAGE":                   "Never ran: its backend could not be reached, after retries.",
	"ToolOutcome.REFUSED":                  "Refused before running: a tool not offered, or arguments that could not be repaired.",
	"ToolOutcome.ERROR":                    "Ran and failed.",
	"ToolOutcome.DECLINED":                 "Never ran: the person declined it (or nobody decided in time); the model heard why.",
	"ToolOutcome.MAY_HAVE_RUN":             "Cut off by a stop while in flight and not safe to repeat: it may or may not have run.",
	"TurnStatus.RUNNING":                   "The runtime is answering (or the turn waits for a runner).",
	"TurnStatus.WAITING_FOR_CLARIFICATION": "The model asked the user a question; answerClarification resumes the turn.",
	"TurnStatus.WAITING_FOR_APPROVAL":      "Calls that need a person's approval wait (Turn.pendingApprovals); decideToolCalls resumes the turn once each has a decision.",
	"TurnStatus.COMPLETED":                 "Answered.",
	"TurnStatus.FAILED":                    "Stopped on an error; Turn.error says why.",
	"TurnStatus.CANCELLED":                 "Stopped by cancelTurn.",
}

var connectionFields = map[string]string{
	"edges":      "The page's edges, in order: each a node and its cursor.",
	"pageInfo":   "Whether there is more, and the cursors to page on from.",
	"totalCount": "How many nodes match, over all pages.",
}

var edgeFields = map[string]string{
	"node":   "The node.",
	"cursor": "Where this node stands: pass it as after or before to page on from it.",
}

var orderFields = map[string]string{
	"direction": "Ascending or descending; ascending when omitted.",
	"field":     "What to order by.",
}

// predicate describes a filter's field from its name, as entgql names them.
func predicate(name string) string {
	switch name {
	case "not":
		return "Matches what the filter does not."
	case "and":
		return "Matches what every filter matches."
	case "or":
		return "Matches what any filter matches."
	}
	for _, p := range []struct{ suffix, words string }{
		{"ContainsFold", "contains the value, ignoring case"},
		{"EqualFold", "equals the value, ignoring case"},
		{"HasPrefix", "starts with the value"},
		{"HasSuffix", "ends with the value"},
		{"Contains", "contains the value"},
		{"NotNil", "is set"},
		{"IsNil", "is not set"},
		{"NotIn", "is none of the values"},
		{"NEQ", "differs from the value"},
		{"GTE", "is at least the value"},
		{"LTE", "is at most the value"},
		{"GT", "is above the value"},
		{"LT", "is below the value"},
		{"In", "is one of the values"},
		{"With", "matches the filters"},
	} {
		if field, ok := strings.CutSuffix(name, p.suffix); ok && field != "" {
			if p.suffix == "With" {
				return "Has a " + strings.TrimPrefix(field, "has") + " that " + p.words + "."
			}
			return field + " " + p.words + "."
		}
	}
	if field, ok := strings.CutPrefix(name, "has"); ok && field != "" && strings.ToUpper(field[:1]) == field[:1] {
		return "Has a " + field + "."
	}
	return name + " equals the value."
}
