package graph

import (
	"regexp"
	"slices"

	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/tools"
)

// inputErrorf refuses what the client sent, in the one vocabulary the
// tools use too (tools.Refusal): its message reaches the client as it is.
func inputErrorf(format string, args ...any) error {
	return tools.Refusef(format, args...)
}

func ptr[T any](v T) *T { return &v }

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func checkPage(first, last *int) error {
	for _, n := range []*int{first, last} {
		if n != nil && (*n < 0 || *n > MaxPage) {
			return inputErrorf("page size must be between 0 and %d", MaxPage)
		}
	}
	return nil
}

var (
	// A model-facing tool name, or an application tool `<application>__<tool>`.
	toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}(__[A-Za-z0-9_-]{1,64})?$`)
)

func checkToolNames(names []string) error {
	for _, n := range names {
		if !toolName.MatchString(n) {
			return inputErrorf("tool %q: not a tool name", n)
		}
	}
	return nil
}

// checkApplication applies the runtime's own rules, so what is registered
// can always be offered.
func checkApplication(in model.RegisterApplicationInput) error {
	if len(in.AllowedTools) == 0 {
		return inputErrorf("allowedTools: name at least one tool")
	}
	app := mcp.Application{Name: in.Name, URL: in.URL, AllowedTools: uniq(in.AllowedTools)}
	if err := app.Validate(); err != nil {
		return tools.Refuse(err)
	}
	return nil
}

// uniq drops repeats and keeps the first order, never nil.
func uniq(s []string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
