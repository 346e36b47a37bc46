package workspace

import (
	"encoding/json"

	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/result"
)

// The workspace tools as the runtime offers them. Every conversation has a
// workspace, so all six are on every turn: descriptions and schemas are
// kept short, as each character is paid on every model call.
//
// Only list_files is previewed. read_file answers the window the model
// asked for (at most result.MaxMaxChars), and search_files bounds its own
// excerpts (MaxSearchChars): a preview would cut what was chosen.
var (
	// ListFiles is list_files.
	ListFiles = tools.Definition{
		Name:   "list_files",
		Brief:  "List the workspace's files.",
		Family: "workspace",
		Description: "List the workspace's files (path, chars, last update), optionally under a folder. Don't call it " +
			"to find text in files (search_files), to check a file you just wrote (its answer names it), or " +
			"again when nothing has changed.",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"folder"}},` +
			`"additionalProperties":false}`),
		Offered: tools.OfferWorkspace,
		Effect:  tools.EffectRead,
		Reads:   []tools.Resource{tools.ResourceWorkspace},
		Preview: tools.PreviewLarge,
		// Paths and sizes: a listing holds none of the files' content.
		Evidence: tools.EvidenceNone,
		Limits:   map[string]int{"files": MaxFiles},
		Operation: `query($conversationId: ID, $path: String) { listFiles(conversationId: $conversationId, path: $path) ` +
			`{ files { path chars bytes mediaType updatedAt } } }`,
		Field: "listFiles",
	}

	// ReadFile is read_file.
	ReadFile = tools.Definition{
		Name:   "read_file",
		Brief:  "Read a workspace file.",
		Family: "workspace",
		Description: "Read a workspace file: maxChars (default 4000) from offset; nextOffset continues. Don't call it " +
			"to find one passage in a long file (search_files), to check what you just wrote or edited (its " +
			"answer says so), or for a tool result (read_tool_result).",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},` +
			`"offset":{"type":"integer"},"maxChars":{"type":"integer","minimum":1024,"maximum":20000}},` +
			`"required":["path"],"additionalProperties":false}`),
		Offered: tools.OfferWorkspace,
		Effect:  tools.EffectRead,
		Reads:   []tools.Resource{tools.ResourceWorkspace},
		Preview: tools.PreviewExempt,
		Limits: map[string]int{
			"maxChars": result.MaxMaxChars, "minMaxChars": result.MinMaxChars, "defaultMaxChars": result.DefaultMaxChars,
		},
		Operation: `query($conversationId: ID, $path: String!, $offset: Int, $maxChars: Int) { readFile(conversationId: $conversationId, ` +
			`path: $path, offset: $offset, maxChars: $maxChars) { path text offset nextOffset totalChars } }`,
		Field: "readFile",
	}

	// SearchFiles is search_files.
	SearchFiles = tools.Definition{
		Name:   "search_files",
		Brief:  "Find lines in the workspace's files that contain given strings.",
		Family: "workspace",
		Description: "Find lines in the workspace's files that contain any of up to 5 literal strings (any case), " +
			"with contextLines (0-3, default 1) around each. Not a regex or a meaning search: give the exact " +
			"words you expect. Don't read whole files to find a line, and don't search for a file's name " +
			"(list_files).",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"strings":{"type":"array","items":{"type":"string"},"maxItems":5},` +
			`"contextLines":{"type":"integer","minimum":0,"maximum":3}},` +
			`"required":["strings"],"additionalProperties":false}`),
		Offered: tools.OfferWorkspace,
		Effect:  tools.EffectRead,
		Reads:   []tools.Resource{tools.ResourceWorkspace},
		Preview: tools.PreviewExempt,
		Limits: map[string]int{
			"strings": MaxSearchStrings, "stringChars": MaxStringChars, "contextLines": MaxContextLines,
			"chars": MaxSearchChars, "lineChars": MaxLineChars,
		},
		Operation: `query($conversationId: ID, $strings: [String!]!, $contextLines: Int) { searchFiles(conversationId: $conversationId, ` +
			`strings: $strings, contextLines: $contextLines) { matches { path line text } hits shown unmatched } }`,
		Field:  "searchFiles",
		Absent: noHits,
	}

	// WriteFile is write_file.
	WriteFile = tools.Definition{
		Name:   "write_file",
		Brief:  "Create or replace up to 3 workspace files, or save stored results to them.",
		Family: "workspace",
		Description: "Create or replace up to 3 workspace files, all or nothing. To save a stored tool result, give " +
			"_toolResultContext.sources in place of content: the exact original, even what your preview left " +
			"out. Don't retype stored output into content, and don't replace an existing file to change part " +
			"of it: use edit_file (replacing over 4000 chars is refused).",
		Schema: json.RawMessage(`{"type":"object","properties":{"files":{"type":"array","maxItems":3,"items":{` +
			`"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},` +
			`"_toolResultContext":{"type":"object","properties":{"sources":{"type":"array","items":{` +
			`"type":"object","properties":{"ref":{"type":"string"},` +
			`"field":{"type":"array","items":{"type":["string","integer"]},"description":"JSON keys/indexes"},` +
			`"between":{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":2,` +
			`"description":"[start, end]: keep the text between; each once"}},` +
			`"required":["ref"],"additionalProperties":false}}},"required":["sources"],"additionalProperties":false}},` +
			`"required":["path"],"additionalProperties":false}}},"required":["files"],"additionalProperties":false}`),
		Offered: tools.OfferWorkspace,
		Effect:  tools.EffectWrite,
		Writes:  []tools.Resource{tools.ResourceWorkspace},
		Preview: tools.PreviewExempt,
		// All or nothing: a bad file refuses the batch before any is written.
		Atomic: true,
		Limits: map[string]int{
			"files": MaxBatchFiles, "replaceChars": MaxReplaceChars, "sources": MaxSources,
			"fileBytes": MaxFileBytes, "workspaceBytes": MaxWorkspaceBytes, "workspaceFiles": MaxFiles,
		},
		Operation: `mutation($conversationId: ID, $files: [WorkspaceFileInput!]!) { writeFiles(conversationId: $conversationId, ` +
			`files: $files) { files { path chars created } } }`,
		Field: "writeFiles",
	}

	// EditFile is edit_file.
	EditFile = tools.Definition{
		Name:   "edit_file",
		Brief:  "Edit a workspace file by exact replacements.",
		Family: "workspace",
		Description: "Edit a workspace file by exact replacements, in order; each old must occur exactly once (widen " +
			"it to make it unique). All or nothing. Make every change to a file in one call. Don't use it to " +
			"create a file or rewrite most of one (write_file), and don't guess old text you have not read.",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},` +
			`"edits":{"type":"array","items":{"type":"object","properties":{` +
			`"old":{"type":"string"},"new":{"type":"string"}},"required":["old","new"],"additionalProperties":false}}},` +
			`"required":["path","edits"],"additionalProperties":false}`),
		Offered: tools.OfferWorkspace,
		Effect:  tools.EffectWrite,
		Writes:  []tools.Resource{tools.ResourceWorkspace},
		Preview: tools.PreviewExempt,
		Limits:  map[string]int{"edits": MaxEdits, "fileBytes": MaxFileBytes, "workspaceBytes": MaxWorkspaceBytes},
		Atomic:  true, // the edits apply together or not at all
		Operation: `mutation($conversationId: ID, $path: String!, $edits: [WorkspaceEditInput!]!) { editFile(conversationId: $conversationId, ` +
			`path: $path, edits: $edits) { path chars edits } }`,
		Field: "editFile",
	}

	// DeleteFile is delete_file.
	DeleteFile = tools.Definition{
		Name:   "delete_file",
		Brief:  "Delete a workspace file.",
		Family: "workspace",
		Description: "Delete a workspace file for good. Don't delete a file to replace it (write_file replaces), to " +
			"tidy away files the person did not ask you to remove, or at a path you have not seen listed.",
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},` +
			`"required":["path"],"additionalProperties":false}`),
		Offered:   tools.OfferWorkspace,
		Effect:    tools.EffectWrite,
		Writes:    []tools.Resource{tools.ResourceWorkspace},
		Preview:   tools.PreviewExempt,
		Operation: `mutation($conversationId: ID, $path: String!) { deleteFile(conversationId: $conversationId, path: $path) { path } }`,
		Field:     "deleteFile",
	}
)

// Definitions are the six workspace tools, in registration order.
var Definitions = []tools.Definition{ListFiles, SearchFiles, ReadFile, WriteFile, EditFile, DeleteFile}

// noHits is search_files' absence: no line matched. Its result always
// names the unmatched strings, so the default rule would never see one.
func noHits(raw json.RawMessage) bool {
	var r struct {
		Hits *int `json:"hits"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Hits == nil {
		return tools.IsAbsent(raw)
	}
	return *r.Hits == 0
}
