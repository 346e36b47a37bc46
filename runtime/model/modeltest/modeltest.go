// Package modeltest holds the request the providers' benchmarks and wire
// tests share: one step of a turn as the loop sends it, with the widest
// deck of tool definitions and a few turns of history.
package modeltest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/runtime/model"
	"github.com/toolgate/toolgate/runtime/prompt"
	"github.com/toolgate/toolgate/tools/registry"
)

// WideTurn returns a step of a turn offered every built-in tool, with its
// system prompt built as the loop builds it, three earlier exchanges and
// this turn's first batch of tool results. Each call returns a new request
// whose deck is a new slice, as each turn's is.
func WideTurn() model.Request {
	defs := registry.All()
	agent := &ent.Agent{Instructions: "You answer questions about the team's documents and data. Be exact; cite the tool results you rely on."}
	req := model.Request{
		System:    prompt.System(agent, defs, false),
		Tools:     prompt.Specs(defs),
		MaxTokens: 4096,
		Attribution: model.Attribution{
			Organization: "tgorg0000000001", User: "tgusr0000000002",
			Agent: "tgagt0000000003", Conversation: "tgcnv0000000004",
		},
	}
	result := strings.Repeat("Quarter, region, revenue & margin <net>: 2024-Q1, north, 1200.50, 0.31\n", 20)
	for i := range 3 {
		id := func(n int) string { return fmt.Sprintf("call_%d_%d", i, n) }
		req.Messages = append(req.Messages,
			model.Message{Role: model.RoleUser, Text: fmt.Sprintf("Question %d: what changed in the quarterly figures, and why?", i+1)},
			model.Message{Role: model.RoleAssistant, Text: "Let me look.", ToolCalls: []model.ToolCall{
				{ID: id(0), Name: "calculator", Arguments: json.RawMessage(`{"expression":"1200.5*0.31"}`)},
				{ID: id(1), Name: "read_tool_result", Arguments: json.RawMessage(`{"ref":"r1","offset":0,"limit":4000}`)},
			}},
			model.Message{Role: model.RoleTool, ToolCallID: id(0), ToolName: "calculator", Text: "372.155"},
			model.Message{Role: model.RoleTool, ToolCallID: id(1), ToolName: "read_tool_result", Text: result},
			model.Message{Role: model.RoleAssistant, Text: "Revenue rose 4% in the north; the margin held at 31%. " + strings.Repeat("The details follow. ", 10)},
		)
	}
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleUser, Text: "And the south?"},
		model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "call_3_0", Name: "read_tool_result", Arguments: json.RawMessage(`{"ref":"r2"}`)},
		}},
		model.Message{Role: model.RoleTool, ToolCallID: "call_3_0", ToolName: "read_tool_result", Text: result},
	)
	return req
}

// Awkward is a deck whose bytes an encoder could alter: HTML characters,
// a line separator, keys out of order, spaces between tokens, and a tool
// with no description and no schema.
var Awkward = []model.ToolSpec{
	{Name: "markup", Description: "Wraps text in <b> & <i> tags\u2028.", Schema: json.RawMessage(`{ "type": "object",
		"properties": {"z": {"type": "string", "description": "<z> & 'z'"}, "a": {"type": "integer"}},
		"required": ["z"] }`)},
	{Name: "bare"},
}

// ReportCPU runs the benchmark loop body and reports the process's CPU time
// per iteration (cpu-ns/op): the client's and the fake server's work, and
// the garbage collector's, which wall time on a loaded machine hides.
func ReportCPU(b *testing.B, body func()) {
	b.ReportAllocs()
	before := cpu()
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64(cpu()-before)/float64(b.N), "cpu-ns/op")
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Recorder is a model.Stream that keeps what it is told.
type Recorder struct {
	mu       sync.Mutex
	text     strings.Builder
	calls    []string
	args     map[int]int
	restarts int
}

// Text keeps a piece of text.
func (r *Recorder) Text(piece string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.text.WriteString(piece)
}

// ToolCall keeps a call's start as "index:name".
func (r *Recorder) ToolCall(index int, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%d:%s", index, name))
}

// ToolArguments keeps a call's argument characters.
func (r *Recorder) ToolArguments(index, chars int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.args == nil {
		r.args = map[int]int{}
	}
	r.args[index] = chars
}

// Restart forgets what the call told so far, and counts.
func (r *Recorder) Restart() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.text.Reset()
	r.calls, r.args = nil, nil
	r.restarts++
}

// Told returns the text told since the last restart, the calls begun, each
// call's argument characters, and the restarts.
func (r *Recorder) Told() (string, []string, map[int]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.text.String(), r.calls, r.args, r.restarts
}
