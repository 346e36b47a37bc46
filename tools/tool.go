// Package tools holds what every tool family shares: the one definition type
// the runtime knows tools by. Each family lives in its own package below.
//
// # How a tool runs
//
// A tool with an Operation is carried out through the GraphQL API: the
// runtime posts Operation to /graphql with the turn's scope token, with the
// model's (repaired, validated) arguments as variables plus
// "conversationId", the turn's conversation. The value of the root field
// Field is the tool's result; it is stored whole under a ref. The same
// operation runs by hand in the playground with an API token and an
// explicit conversationId.
//
// Conventions for a result object:
//   - "failures": [{"item": 0, "input": "…", "message": "…"}] lists the items
//     of a many-item call that failed; the others stand. Items the runtime
//     refused against the schema (see Atomic) are never sent: the resolver
//     sees the others, and the runtime maps its item indices (and any
//     "list[i]" its messages name) back to the list the model sent.
//   - "truncated": true says the tool itself cut what it returns (a read
//     that stopped at its budget): the stored result is marked truncated at
//     source, and exports refuse it.
//   - "evidence": [{"ref": "…", "start": 0, "end": 120}] names the byte
//     ranges of other stored results the call showed (a read window, say):
//     recorded on the call as what the model actually saw, for a tool whose
//     Evidence is EvidenceWindows only.
//   - A result that is null, empty, or an object whose values are all
//     empty (apart from "failures") is an absence: the tool ran and matched
//     nothing. A definition can decide otherwise with Absent.
//   - A definition with Media set answers an object whose "images" are
//     [{"mimeType": "image/jpeg", "data": "<base64>"}]: the result is
//     non-text media, stored as MCP content blocks (its other fields as
//     one JSON text block, then an image block per image), never
//     previewed, and its images sent to a model that takes images.
//   - A resolver error is the tool's error: its message is what the model
//     hears. Ids and refs out of scope answer "not found", like ids of
//     nothing.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
)

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
	// OfferMemorySwitch tools need the agent's memory switch and the
	// server's embedding model.
	OfferMemorySwitch Offering = "memory"
	// OfferBudgetSwitch tools need the agent's budget-check switch.
	OfferBudgetSwitch Offering = "budget"
	// OfferPastConversationsSwitch tools need the agent's past-conversation search switch.
	OfferPastConversationsSwitch Offering = "past_conversations"
	// OfferWebProvider tools need an approved web provider: configured on
	// the server and enabled by the organisation's admin.
	OfferWebProvider Offering = "web_provider"
	// OfferSkillBound tools are offered when the agent binds a published
	// skill, whether or not it lists the tool.
	OfferSkillBound Offering = "skill_bound"
	// OfferKnowledge tools need the agent to bind a knowledge base and the
	// server to have an embedding model.
	OfferKnowledge Offering = "knowledge"
	// OfferKnowledgeOrDocument tools need the agent to bind a knowledge
	// base, or the conversation to hold a document attachment.
	OfferKnowledgeOrDocument Offering = "knowledge_or_document"
	// OfferAttachment tools need the conversation to hold an attachment and
	// the server to have an embedding model.
	OfferAttachment Offering = "attachment"
	// OfferArtifactReview tools travel with the artifact writers: offered,
	// listed or not, when the agent's turns get an artifact writer and the
	// server found a headless browser.
	OfferArtifactReview Offering = "artifact_review"
)

// The paragraph the search tools (documents, attachments, memory, past
// conversations) share, collected once however many of them a turn has.
const (
	SearchGuidanceKey = "searches"
	SearchGuidance    = "A search query listed under failures with kind ABSENCE ran and matched nothing: rephrase it or say so. " +
		"One with kind OUTAGE never ran: say the search could not be done, never that nothing was found."
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

// Evidence says what of a tool's successful result counts as evidence an
// answer rests on (ToolCall.evidence, Turn.grounding). Only content the
// model was shown ever counts: model-visible previews and returned
// windows. Acknowledgements and instructions count for nothing whatever
// their definition says (Definition.Grounds).
type Evidence string

// The evidence rules.
const (
	// EvidenceShown: what the model was shown of the result, its preview
	// or the whole. The default.
	EvidenceShown Evidence = ""
	// EvidenceNone: nothing. The result names and sizes things (a listing
	// of files, of tools) and holds none of their content.
	EvidenceNone Evidence = "none"
	// EvidenceWindows: the windows of other stored results that the
	// result's "evidence" field names (read_tool_result), each only where
	// the result it shows counted as evidence itself; never the result's
	// own text. No other tool's "evidence" field is believed.
	EvidenceWindows Evidence = "windows"
)

// Resource is conversation state that several tools reach: what one call
// writes, another call of the same batch may read.
type Resource string

// The resources tools declare.
const (
	// ResourceWorkspace is the conversation's files.
	ResourceWorkspace Resource = "workspace"
	// ResourceTasks is the conversation's task list.
	ResourceTasks Resource = "tasks"
	// ResourceArtifacts is the conversation's artifacts.
	ResourceArtifacts Resource = "artifacts"
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
	// Brief is what the tool does in at most MaxBrief characters: all a
	// turn that defers the tool's definition sends of it (Stub). Always-on
	// tools are never deferred and need none.
	Brief string
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
	// Annotations are an application tool's hints, as its server gives
	// them (nil: none): approvals read whether it may write.
	Annotations *schematype.ToolAnnotations
	// Reads and Writes name the conversation state the tool reads and
	// changes. Calls of one batch that write a resource run in the model's
	// order, and calls that read it run after them, so an answer never
	// depends on which call happened to finish first; the rest run at once.
	Reads, Writes []Resource
	// Preview decides whether a large result is previewed.
	Preview Preview
	// Limits are the numeric ceilings the resolver enforces, by name, for
	// display in the catalogue and in refusals.
	Limits map[string]int
	// Atomic says the call's items are one batch, all or nothing (the
	// files of write_file, the edits of edit_file, the whole task list):
	// an item that does not fit the schema refuses the call. Otherwise a
	// tool whose arguments hold one list of items (the schema's one
	// required array) runs the items that fit, and each item that does not
	// is a failure of its own, by index, with the reason.
	Atomic bool
	// Operation is the GraphQL document that runs the tool. Empty for tools
	// the runtime carries out itself (clarify, update_tasks).
	Operation string
	// Run carries out a tool with no Operation in the runtime's process:
	// with the runtime's unscoped client c, within the call's conversation.
	Run func(ctx context.Context, c *ent.Client, conversationID int, args json.RawMessage) (json.RawMessage, error)
	// Field is the operation's root field, whose value is the result.
	Field string
	// Absent decides whether a result is an absence; nil means IsAbsent.
	Absent func(result json.RawMessage) bool
	// Pauses says a successful call ends the turn's run until the person
	// answers (clarify): the runtime stores the question and waits, and the
	// answer becomes the call's result.
	Pauses bool
	// Media says the result carries images (see the package comment):
	// non-text media.
	Media bool
	// Instructs says the result is instructions for the model (a skill):
	// passed whole like an acknowledgement, and never evidence of what an
	// answer rests on.
	Instructs bool
	// Evidence says what of a successful result counts as evidence; the
	// zero value is what the model was shown of it.
	Evidence Evidence
	// Describe, when set, writes the description for the turns of an agent
	// from what the agent binds (load_skill names the skills it may load).
	// The catalogue and the runtime both use it: what is measured is what
	// is sent.
	Describe func(Bound) string
}

// Bound is what an agent binds that a description may name.
type Bound struct {
	// Skills are the published skills the agent binds, by name.
	Skills []SkillBrief
}

// SkillBrief is a published skill as a description names it.
type SkillBrief struct {
	Name        string
	Description string
}

// For returns the definition as the turns of an agent that binds b receive
// it.
func (d Definition) For(b Bound) Definition {
	if d.Describe != nil {
		d.Description = d.Describe(b)
	}
	return d
}

// Acknowledges reports whether the tool's result is an acknowledgement (a
// write's receipt, the task list, suggestions, clarify) or instructions (a
// skill): passed as it is, and never evidence of what an answer rests on.
func (d Definition) Acknowledges() bool {
	return d.Instructs || d.Preview == PreviewExempt && d.Effect != EffectRead
}

// Grounds returns what of a successful result of the tool counts as
// evidence: EvidenceNone for an acknowledgement or instructions (a skill's,
// which are workflow), Evidence otherwise.
func (d Definition) Grounds() Evidence {
	if d.Acknowledges() {
		return EvidenceNone
	}
	return d.Evidence
}

// AlwaysOn reports whether every turn pays for the tool's definition.
func (d Definition) AlwaysOn() bool {
	return d.Offered == OfferAlways || d.Offered == OfferWorkspace
}

// IsAbsent is the default absence rule: null, "", [], {}, or an object
// whose values other than "failures" are all themselves absent or zero.
func IsAbsent(result json.RawMessage) bool {
	var v any
	if err := json.Unmarshal(result, &v); err != nil {
		return false
	}
	return empty(v, true)
}

func empty(v any, top bool) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case float64:
		return !top && x == 0
	case bool:
		return !top && !x
	case map[string]any:
		for k, e := range x {
			if top && k == "failures" {
				continue
			}
			if !empty(e, false) {
				return false
			}
		}
		return true
	}
	return false
}

// MaxBrief is the longest Brief.
const MaxBrief = 80

// SchemaTool is the name of get_tool_schema, which reads a deferred tool's
// whole definition.
const SchemaTool = "get_tool_schema"

// StubSchema is the argument schema a deferred tool is sent with: any
// object. Its calls are still checked against the tool's own schema.
const StubSchema = `{"type":"object"}`

// Stub returns the definition as a turn that defers it sends it: its name,
// its Brief (an application tool, which has none, gets its description's
// start) and StubSchema. The model reads the whole definition with
// SchemaTool before it first calls the tool.
func (d Definition) Stub() Definition {
	brief := d.Brief
	if brief == "" {
		brief = firstSentence(d.Description, MaxBrief)
	}
	d.Description, d.Schema, d.Describe = brief, json.RawMessage(StubSchema), nil
	return d
}

// firstSentence is s's first sentence when it fits in n characters, else s
// cut to n (Shorten).
func firstSentence(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ". "); i >= 0 && utf8.RuneCountInString(s[:i+1]) <= n {
		return s[:i+1]
	}
	return Shorten(s, n)
}

// Shorten cuts s to at most n characters, at a word boundary when one is
// near, and marks the cut.
func Shorten(s string, n int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut := string([]rune(s)[:n-1])
	if i := strings.LastIndexAny(cut, " \t\n"); i >= len(cut)*3/4 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " \t\n.,;:") + "…"
}

// Wire is the definition as the model receives it: compact JSON of its
// name, description and argument schema. The same definition gives the same
// bytes on every call, so providers can cache the prompt prefix.
func (d Definition) Wire() []byte {
	b, err := json.Marshal(struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}{d.Name, d.Description, compact(d.Schema)})
	if err != nil {
		// Schema is not valid JSON: a programming error caught by every
		// family's definition test.
		panic("tool " + d.Name + ": " + err.Error())
	}
	return b
}

func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// Refusal is a request refused for what it asked, before anything ran: a
// tool call over a limit, outside the workspace, naming a ref not found, or
// any API input that does not fit. It is the one type for "you asked for
// something that cannot be done": its message reaches the caller (the
// model, or the client as a BAD_USER_INPUT error) as it is.
type Refusal struct{ msg string }

// Error returns the message.
func (e *Refusal) Error() string { return e.msg }

// Refusef returns a Refusal with a formatted message.
func Refusef(format string, args ...any) error {
	return &Refusal{msg: fmt.Sprintf(format, args...)}
}

// Refuse returns a Refusal saying what err says.
func Refuse(err error) error { return &Refusal{msg: err.Error()} }

// RefNotFound is the one answer to a ref that cannot be read: of another
// conversation, another organisation, or nothing, in the same words.
func RefNotFound(ref string) string {
	return fmt.Sprintf("ref %q not found", ref)
}

// Failure is a call that ran and failed for what it ran: code that threw
// or hit one of its bounds (and whose effects were undone). Unlike a
// Refusal, something ran; its message reaches the caller (the model as an
// ERROR, the client as a RUN_FAILED error) as it is.
type Failure struct{ msg string }

// Error returns the message.
func (e *Failure) Error() string { return e.msg }

// Failf returns a Failure with a formatted message.
func Failf(format string, args ...any) error {
	return &Failure{msg: fmt.Sprintf(format, args...)}
}

// SearchLimits are the bounds of a search tool's arguments: how many
// distinct queries a call runs, how long one may be, and how many hits one
// may ask for.
type SearchLimits struct {
	Queries, QueryChars, MaxResults int
}

// Check refuses queries (none, too many, empty, too long, or repeating an
// earlier one, case and spacing aside) and a maxResults outside 1 to
// MaxResults, naming the argument.
func (l SearchLimits) Check(queries []string, maxResults *int) error {
	if len(queries) == 0 || len(queries) > l.Queries {
		return Refusef("queries: give 1 to %d queries, not %d", l.Queries, len(queries))
	}
	seen := map[string]bool{}
	for i, q := range queries {
		k := QueryKey(q)
		switch {
		case k == "":
			return Refusef("queries[%d] is empty", i)
		case utf8.RuneCountInString(q) > l.QueryChars:
			return Refusef("queries[%d] is longer than %d characters", i, l.QueryChars)
		case seen[k]:
			return Refusef("queries[%d] repeats an earlier query: give distinct angles", i)
		}
		seen[k] = true
	}
	if maxResults != nil && (*maxResults < 1 || *maxResults > l.MaxResults) {
		return Refusef("maxResults must be between 1 and %d, not %d", l.MaxResults, *maxResults)
	}
	return nil
}
