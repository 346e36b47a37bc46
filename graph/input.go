package graph

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/graph/model"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/registry"
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

// checkTools refuses a tool list that names a tool that does not exist:
// neither built in nor a tool an application of the caller's organisation
// allows. The refusal names it and lists what an agent can name.
func (r *Resolver) checkTools(ctx context.Context, names []string) error {
	if err := checkToolNames(names); err != nil {
		return err
	}
	known := map[string]bool{}
	var listable []string
	for _, d := range registry.All() {
		known[d.Name] = true
		if !d.AlwaysOn() {
			listable = append(listable, d.Name)
		}
	}
	apps, err := r.client(ctx).Application.Query().All(ctx)
	if err != nil {
		return fmt.Errorf("load applications: %w", err)
	}
	for _, a := range apps {
		for _, t := range a.AllowedTools {
			known[a.Name+"__"+t] = true
			listable = append(listable, a.Name+"__"+t)
		}
	}
	var unknown []string
	for _, n := range names {
		if !known[n] {
			unknown = append(unknown, strconv.Quote(n))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(listable)
	return inputErrorf("tools: no tool named %s; an agent can list %s (always-on tools need not be listed)",
		strings.Join(unknown, ", "), strings.Join(listable, ", "))
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
