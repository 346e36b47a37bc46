// Package approval decides which tool calls wait for a person's decision
// before they run, and checks the arguments a person edits. It is pure:
// the policies come from the application and the agent, the hints from the
// tool's definition.
package approval

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/runtime/repair"
	"github.com/toolgate/toolgate/tools"
)

// Rules are the approval settings that reach one tool: its application's
// (by the server's own tool name, and a default for the others) and its
// agent's (by the name the model sees), which may only tighten them.
type Rules struct {
	Application []schematype.ApprovalRule
	Default     schematype.ApprovalPolicy
	Agent       []schematype.ApprovalRule
}

// Policy returns the policy of def under r. An application tool takes its
// application's rule for it, else the application's default; a built-in
// tool NEVER (none writes outside its conversation). The agent's rule for
// the tool, when stricter, wins.
func Policy(def tools.Definition, r Rules) schematype.ApprovalPolicy {
	p := schematype.ApprovalNever
	if def.Family == mcp.Family {
		p = r.Default
		if !p.Valid() {
			p = schematype.ApprovalNever
		}
		if _, tool, ok := mcp.SplitToolName(def.Name); ok {
			for _, rule := range r.Application {
				if rule.Tool == tool {
					p = rule.Policy
				}
			}
		}
	}
	for _, rule := range r.Agent {
		if rule.Tool == def.Name {
			p = p.Stricter(rule.Policy)
		}
	}
	return p
}

// Gates reports whether calls of def wait for a decision under p: ALWAYS
// does; WRITES does for a tool that may write outside the conversation (an
// application tool not marked read-only, or marked destructive).
func Gates(def tools.Definition, p schematype.ApprovalPolicy) bool {
	switch p {
	case schematype.ApprovalAlways:
		return true
	case schematype.ApprovalWrites:
		return def.Family == mcp.Family && def.Annotations.Writes()
	}
	return false
}

// Check reads arguments a person edited against the tool's JSON Schema,
// repairing their shape as the model's are repaired, and returns them as
// they would be sent; an error says what does not fit.
func Check(tool, schema, args string) (string, error) {
	if !json.Valid([]byte(args)) {
		return "", fmt.Errorf("arguments are not JSON")
	}
	t, err := repair.Compile(tool, json.RawMessage(schema))
	if err != nil {
		return "", fmt.Errorf("the tool's schema is broken: %w", err)
	}
	fixed, _, err := t.Fix(json.RawMessage(args))
	if err != nil {
		return "", err
	}
	if len(fixed) == 0 {
		fixed = json.RawMessage(args)
	}
	return string(fixed), nil
}
