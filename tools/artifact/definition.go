package artifact

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
)

// Family is the artifact tools' family.
const Family = "artifact"

// guidance travels with the writers: one paragraph, paid only on turns
// that can write artifacts.
const guidance = "Artifacts are documents the person sees beside the chat: html (a slide deck is one <section> per slide), " +
	"svg or markdown. Every write is a new version. Visual files need inspection before saving: a new html or svg " +
	"version is a draft the person does not see until inspect_artifact has rendered it."

// The artifact writers as the runtime offers them, to agents that
// allowlist them.
var (
	// CreateArtifact is create_artifact.
	CreateArtifact = tools.Definition{
		Name:   "create_artifact",
		Family: Family,
		Description: "Create an artifact (version 1): a document shown beside the chat. Don't create a second " +
			"artifact to change one you made (rewrite_artifact, update_artifact), and don't use it for files the " +
			"person will download (write_file).",
		Schema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},` +
			`"kind":{"type":"string","enum":["html","svg","markdown"]},"content":{"type":"string"}},` +
			`"required":["title","kind","content"],"additionalProperties":false}`),
		Guidance:    guidance,
		GuidanceKey: Family,
		Offered:     tools.OfferAllowlisted,
		Effect:      tools.EffectWrite,
		Writes:      []tools.Resource{tools.ResourceArtifacts},
		Preview:     tools.PreviewExempt,
		Limits:      map[string]int{"contentBytes": MaxContentBytes, "titleChars": MaxTitleChars, "artifacts": MaxArtifacts},
		Operation: `mutation($conversationId: ID, $title: String!, $kind: String!, $content: String!) { createArtifact(` +
			`conversationId: $conversationId, title: $title, kind: $kind, content: $content) ` + savedFields + ` }`,
		Field: "createArtifact",
	}

	// RewriteArtifact is rewrite_artifact.
	RewriteArtifact = tools.Definition{
		Name:   "rewrite_artifact",
		Family: Family,
		Description: "Replace an artifact's whole content with a new version. Don't retype a long artifact to " +
			"change a few parts (update_artifact).",
		Schema: json.RawMessage(`{"type":"object","properties":{"artifactId":{"type":"string"},` +
			`"content":{"type":"string"}},"required":["artifactId","content"],"additionalProperties":false}`),
		Guidance:    guidance,
		GuidanceKey: Family,
		Offered:     tools.OfferAllowlisted,
		Effect:      tools.EffectWrite,
		Writes:      []tools.Resource{tools.ResourceArtifacts},
		Preview:     tools.PreviewExempt,
		Limits:      map[string]int{"contentBytes": MaxContentBytes, "versions": MaxVersions},
		Operation: `mutation($conversationId: ID, $artifactId: ID!, $content: String!) { rewriteArtifact(` +
			`conversationId: $conversationId, artifactId: $artifactId, content: $content) ` + savedFields + ` }`,
		Field: "rewriteArtifact",
	}

	// UpdateArtifact is update_artifact.
	UpdateArtifact = tools.Definition{
		Name:   "update_artifact",
		Family: Family,
		Description: "Make a new version of an artifact by exact replacements in its latest one, in order; each old " +
			"must occur exactly once. All or nothing. Don't guess old text you have not written or read.",
		Schema: json.RawMessage(`{"type":"object","properties":{"artifactId":{"type":"string"},` +
			`"edits":{"type":"array","items":{"type":"object","properties":{` +
			`"old":{"type":"string"},"new":{"type":"string"}},"required":["old","new"],"additionalProperties":false}}},` +
			`"required":["artifactId","edits"],"additionalProperties":false}`),
		Guidance:    guidance,
		GuidanceKey: Family,
		Offered:     tools.OfferAllowlisted,
		Effect:      tools.EffectWrite,
		Writes:      []tools.Resource{tools.ResourceArtifacts},
		Preview:     tools.PreviewExempt,
		Limits:      map[string]int{"edits": MaxEdits, "contentBytes": MaxContentBytes, "versions": MaxVersions},
		Operation: `mutation($conversationId: ID, $artifactId: ID!, $edits: [WorkspaceEditInput!]!) { updateArtifact(` +
			`conversationId: $conversationId, artifactId: $artifactId, edits: $edits) ` + savedFields + ` }`,
		Field: "updateArtifact",
	}
)

const savedFields = `{ artifactId title kind version chars edits draft note }`

// Writers are the tools that write artifacts, in registration order: the
// review tools travel with them.
var Writers = []tools.Definition{CreateArtifact, RewriteArtifact, UpdateArtifact}
