package code

import (
	"encoding/json"
	"time"
)

// The sandbox speaks newline-delimited JSON over the child's stdin and
// stdout: the child says it is ready (its interpreter prepared, often long
// before a run needs it), the parent sends one job, the child says it
// started (it holds the job and has capped itself: no code ran yet), then
// it sends messages (output, workspace calls, the end) and the parent
// answers each workspace call.

// job is what the parent sends first.
type job struct {
	Code        string    `json:"code"`
	ToolResults []string  `json:"toolResults"`
	Now         time.Time `json:"now"`
	Limits      Limits    `json:"limits"`
}

// message is one message of the child.
type message struct {
	// Ready says the child waits for its job; Started that it took it.
	Ready   bool `json:"ready,omitempty"`
	Started bool `json:"started,omitempty"`
	// Out is console output, in order.
	Out string `json:"out,omitempty"`
	// Op is a workspace call: "read", "write" or "list".
	Op   string `json:"op,omitempty"`
	Path string `json:"path,omitempty"`
	Text string `json:"text,omitempty"`
	// Done ends the run; Error says why it failed (empty: it did not),
	// Bound names the bound it hit, if that is why.
	Done  bool   `json:"done,omitempty"`
	Error string `json:"error,omitempty"`
	Bound string `json:"bound,omitempty"`
}

// reply answers a workspace call: Value is the call's JSON result, Error
// what the code's call throws, Bound a bound the call hit (the run stops).
type reply struct {
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
	Bound string          `json:"bound,omitempty"`
}
