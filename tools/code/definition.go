// Package code holds run_code: JavaScript, run by goja, over stored tool
// results and the conversation's workspace, in a sandbox that survives
// hostile code.
//
// # The sandbox
//
// Each run is a fresh child process of the same binary (`toolgate
// sandbox`, or a test binary re-executed with ChildEnv), fed the job over
// stdin and answering over stdout. The child gets an empty environment
// and caps its own address space (setrlimit) before it runs anything, so
// an allocation bomb kills the child, never the server. The interpreter
// has no require, no network, no file system and no timers; its clock is
// the turn's time; the standard objects are frozen. Every run is bounded
// in wall time (the child interrupts the code; the parent kills the child
// a little later), memory (a heap watchdog, then the address-space cap),
// call depth, output and workspace writes. A bound hit is an error that
// names the bound and quotes what the code printed before.
//
// Workspace reads go to the parent, which reads the database; writes are
// checked as they happen and kept by the parent until the code finishes:
// then all are committed in one transaction, or none when the run failed.
package code

import (
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/tools"
)

// Limits bound one run.
type Limits struct {
	// Wall is the longest a run may take.
	Wall time.Duration `json:"wall"`
	// MemoryBytes is the memory the child may take beyond what it maps
	// at start: its address space is capped there, and its heap watchdog
	// interrupts the code at half of it.
	MemoryBytes int64 `json:"memoryBytes"`
	// OutputBytes bounds what console.log may print.
	OutputBytes int `json:"outputBytes"`
	// Writes bounds the workspace.write calls of a run.
	Writes int `json:"writes"`
	// CallDepth bounds nested function calls.
	CallDepth int `json:"callDepth"`
}

// DefaultLimits are the bounds run_code promises.
var DefaultLimits = Limits{
	Wall:        5 * time.Second,
	MemoryBytes: 512 << 20,
	OutputBytes: 1 << 20,
	Writes:      20,
	CallDepth:   2000,
}

// The other limits of a call.
const (
	// MaxToolResults is the most refs one call may pass.
	MaxToolResults = 3
	// MaxCodeChars bounds the code itself.
	MaxCodeChars = 100_000
	// MaxConcurrent is the most runs one server process runs at once;
	// more wait their turn, within their own call's time.
	MaxConcurrent = 4
	// DefaultIdle is how many children a sandbox keeps started ahead.
	DefaultIdle = 2
	// quotedChars is how much of what a failed run printed its error
	// quotes (the end of it: where the code got to).
	quotedChars = 2000
)

// The bounds a run can hit, as its error names them.
const (
	BoundTime      = "time"
	BoundMemory    = "memory"
	BoundOutput    = "output"
	BoundWrites    = "workspace writes"
	BoundCallDepth = "call depth"
)

// RunCode is run_code.
var RunCode = tools.Definition{
	Name:   "run_code",
	Brief:  "Run JavaScript over stored results and workspace files too large to read.",
	Family: "code",
	Description: "Run JavaScript (strict mode, no modules) to transform data too large to read: toolResults[i] is the WHOLE text " +
		"of the i-th ref (JSON.parse it), even what its preview left out; workspace.read(path), workspace.write(path, text) " +
		"(kept only if the run succeeds), workspace.list(). What console.log prints is the result. No network, require, " +
		"fetch, timers or environment; Date is the turn's time. Bounds: 5 s, 512 MiB, 1 MiB printed, 20 writes. " +
		"Don't use it for data you can already read whole, for one sum (use calculator), or to read a ref (read_tool_result).",
	Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"code":{"type":"string","description":"JavaScript; console.log the answer"},` +
		`"toolResults":{"type":"array","items":{"type":"string"},"maxItems":3,"description":"refs"}},` +
		`"required":["code"],"additionalProperties":false}`),
	Offered: tools.OfferAllowlisted,
	Effect:  tools.EffectWrite,
	Reads:   []tools.Resource{tools.ResourceWorkspace},
	Writes:  []tools.Resource{tools.ResourceWorkspace},
	Preview: tools.PreviewLarge,
	Limits: map[string]int{
		"toolResults": MaxToolResults, "codeChars": MaxCodeChars,
		"wallSeconds": int(DefaultLimits.Wall / time.Second), "memoryBytes": int(DefaultLimits.MemoryBytes),
		"outputBytes": DefaultLimits.OutputBytes, "writes": DefaultLimits.Writes, "callDepth": DefaultLimits.CallDepth,
	},
	Operation: `mutation($conversationId: ID, $code: String!, $toolResults: [String!]) { runCode(conversationId: $conversationId, ` +
		`code: $code, toolResults: $toolResults) { output files { path chars created } } }`,
	Field: "runCode",
}

// Definitions are the Code family's tools.
var Definitions = []tools.Definition{RunCode}
