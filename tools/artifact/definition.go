package artifact

import (
	"encoding/json"
	"strconv"

	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/workspace"
)

// Family is the artifact tools' family.
const Family = "artifact"

// guidance travels with the writers: one paragraph, paid only on turns
// that can write artifacts.
const guidance = "Artifacts are documents the person sees beside the chat: html (a slide deck is one <section> per slide), " +
	"svg or markdown. Every write is a new version."

// The artifact writers as the runtime offers them, to agents that
// allowlist them.
var (
	// CreateArtifact is create_artifact.
	CreateArtifact = tools.Definition{
		Name:   "create_artifact",
		Brief:  "Create an artifact: a document shown beside the chat.",
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
		Brief:  "Replace an artifact's whole content with a new version.",
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
		Brief:  "Make a new artifact version by exact replacements in its latest one.",
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
		Atomic:      true, // the edits apply together or not at all
		Operation: `mutation($conversationId: ID, $artifactId: ID!, $edits: [WorkspaceEditInput!]!) { updateArtifact(` +
			`conversationId: $conversationId, artifactId: $artifactId, edits: $edits) ` + savedFields + ` }`,
		Field: "updateArtifact",
	}
)

const savedFields = `{ artifactId title kind version chars edits draft note }`

// Writers are the tools that write artifacts, in registration order: the
// review tools travel with them.
var Writers = []tools.Definition{CreateArtifact, RewriteArtifact, UpdateArtifact}

// reviewGuidance travels with the review tools, on turns where a browser
// can render what the writers save.
const reviewGuidance = "Visual files need inspection before saving: a new html or svg version is a draft the person " +
	"does not see until inspect_artifact has rendered it. Look at every page, fix what overflows, inspect again."

// The review tools, offered with the writers when the server has a
// headless browser (package browser).
var (
	// InspectArtifact is inspect_artifact.
	InspectArtifact = tools.Definition{
		Name:   "inspect_artifact",
		Brief:  "See an html or svg artifact as the person will: page images, overflows.",
		Family: Family,
		Description: "See an html or svg artifact's latest version as the person will: page images (deck slides, else " +
			"screen-high pages; 10 per call, first 10 by default) and overflowing elements. Marks that version inspected, " +
			"so the person sees it. Don't re-inspect a version you have not changed, or inspect markdown.",
		Schema: json.RawMessage(`{"type":"object","properties":{"artifactId":{"type":"string"},` +
			`"pages":{"type":"array","maxItems":` + strconv.Itoa(MaxInspectPages) + `,"items":{"type":"integer","minimum":1}}},` +
			`"required":["artifactId"],"additionalProperties":false}`),
		Guidance:    reviewGuidance,
		GuidanceKey: "artifact_review",
		Offered:     tools.OfferArtifactReview,
		Effect:      tools.EffectIdempotent,
		Reads:       []tools.Resource{tools.ResourceArtifacts},
		Preview:     tools.PreviewExempt,
		Media:       true,
		Limits:      map[string]int{"pages": MaxInspectPages},
		Operation: `mutation($conversationId: ID, $artifactId: ID!, $pages: [Int!]) { inspectArtifact(` +
			`conversationId: $conversationId, artifactId: $artifactId, pages: $pages) ` +
			`{ artifactId version pages shown summary images { page mimeType data } } }`,
		Field: "inspectArtifact",
	}

	// MeasureLayout is measure_layout.
	MeasureLayout = tools.Definition{
		Name:   "measure_layout",
		Brief:  "Measure an artifact's elements by CSS selector: boxes, overflowing text.",
		Family: Family,
		Description: "Measure elements of an artifact's latest version by CSS selector: boxes in px, text that does not " +
			"fit its box, elements past the page edge. Don't use it to look at pages (inspect_artifact), or on every " +
			"element when nothing looked wrong.",
		Schema: json.RawMessage(`{"type":"object","properties":{"artifactId":{"type":"string"},` +
			`"selectors":{"type":"array","minItems":1,"maxItems":` + strconv.Itoa(MaxSelectors) + `,"items":{"type":"string"}}},` +
			`"required":["artifactId","selectors"],"additionalProperties":false}`),
		Guidance:    reviewGuidance,
		GuidanceKey: "artifact_review",
		Offered:     tools.OfferArtifactReview,
		Effect:      tools.EffectRead,
		Reads:       []tools.Resource{tools.ResourceArtifacts},
		Preview:     tools.PreviewLarge,
		Limits:      map[string]int{"selectors": MaxSelectors, "elementsPerSelector": MaxElements},
		Operation: `query($conversationId: ID, $artifactId: ID!, $selectors: [String!]!) { measureLayout(` +
			`conversationId: $conversationId, artifactId: $artifactId, selectors: $selectors) { artifactId version pages ` +
			`selectors { selector count elements { page element text box { x y width height } overflowX overflowY outside } } ` +
			`failures { item input kind message } } }`,
		Field: "measureLayout",
	}

	// PrintPDF is print_pdf.
	PrintPDF = tools.Definition{
		Name:   "print_pdf",
		Brief:  "Print an html or svg artifact to a PDF in the workspace.",
		Family: Family,
		Description: "Print an html or svg artifact's latest version to a PDF in the workspace (a deck: one slide per " +
			"page). Don't print a version you have not inspected, or to check a layout (inspect_artifact).",
		Schema: json.RawMessage(`{"type":"object","properties":{"artifactId":{"type":"string"},` +
			`"path":{"type":"string"}},"required":["artifactId","path"],"additionalProperties":false}`),
		Guidance:    reviewGuidance,
		GuidanceKey: "artifact_review",
		Offered:     tools.OfferArtifactReview,
		Effect:      tools.EffectIdempotent,
		Reads:       []tools.Resource{tools.ResourceArtifacts},
		Writes:      []tools.Resource{tools.ResourceWorkspace},
		Preview:     tools.PreviewExempt,
		Limits:      map[string]int{"pdfBytes": workspace.MaxBinaryBytes},
		Operation: `mutation($conversationId: ID, $artifactId: ID!, $path: String!) { printPdf(` +
			`conversationId: $conversationId, artifactId: $artifactId, path: $path) { artifactId version path pages bytes created } }`,
		Field: "printPdf",
	}
)

// Reviewers are the review tools, in registration order: they follow the
// writers.
var Reviewers = []tools.Definition{InspectArtifact, MeasureLayout, PrintPDF}

// Writes reports whether name is one of the artifact writers: the review
// tools travel with them.
func Writes(name string) bool {
	for _, d := range Writers {
		if d.Name == name {
			return true
		}
	}
	return false
}
