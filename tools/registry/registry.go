// Package registry lists every toolgate tool definition, in registration
// order: the order the runtime offers them and collects their guidance.
// A new family adds its definitions here.
package registry

import (
	"slices"

	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/artifact"
	"github.com/toolgate/toolgate/tools/budget"
	"github.com/toolgate/toolgate/tools/calc"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/history"
	"github.com/toolgate/toolgate/tools/interact"
	"github.com/toolgate/toolgate/tools/memory"
	"github.com/toolgate/toolgate/tools/result"
	"github.com/toolgate/toolgate/tools/skill"
	"github.com/toolgate/toolgate/tools/tasks"
	"github.com/toolgate/toolgate/tools/transcript"
	"github.com/toolgate/toolgate/tools/web"
	"github.com/toolgate/toolgate/tools/workspace"
)

// All returns every built-in tool definition, in registration order.
func All() []tools.Definition {
	return slices.Concat(
		interact.Definitions,
		[]tools.Definition{
			calc.Definition,
			result.Definition,
			transcript.Definition,
		},
		workspace.Definitions,
		document.Definitions,
		web.Definitions,
		code.Definitions,
		artifact.Writers,
		artifact.Reviewers,
		[]tools.Definition{
			budget.Check,
		},
		memory.Definitions,
		history.Definitions,
		skill.Definitions,
		catalog.Definitions,
		[]tools.Definition{
			tasks.Definition,
		},
	)
}

// ByName returns the built-in definition named name.
func ByName(name string) (tools.Definition, bool) {
	for _, d := range All() {
		if d.Name == name {
			return d, true
		}
	}
	return tools.Definition{}, false
}

// Fields returns the GraphQL root fields that run tools, by tool name: the
// only part of the API a turn's scope token opens.
func Fields() map[string]string {
	out := map[string]string{}
	for _, d := range All() {
		if d.Field != "" {
			out[d.Field] = d.Name
		}
	}
	return out
}

// Pausing returns the names of the tools whose calls pause the turn until
// the person answers.
func Pausing() []string {
	var out []string
	for _, d := range All() {
		if d.Pauses {
			out = append(out, d.Name)
		}
	}
	return out
}
