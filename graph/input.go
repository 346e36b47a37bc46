package graph

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"

	"github.com/toolgate/toolgate/graph/model"
)

// InputError is a mistake in what the client sent; its message reaches the
// client as it is.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

func ptr[T any](v T) *T { return &v }

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
	appName  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	mcpTool  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

func checkToolNames(names []string) error {
	for _, n := range names {
		if !toolName.MatchString(n) {
			return inputErrorf("tool %q: not a tool name", n)
		}
	}
	return nil
}

func checkApplication(in model.RegisterApplicationInput) error {
	if !appName.MatchString(in.Name) {
		return inputErrorf("application name %q: use 1 to 40 lower-case letters, digits and '-', starting with a letter", in.Name)
	}
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return inputErrorf("application url %q: want an absolute http or https url", in.URL)
	}
	if len(in.AllowedTools) == 0 {
		return inputErrorf("allowedTools: name at least one tool")
	}
	for _, t := range in.AllowedTools {
		if !mcpTool.MatchString(t) || len(in.Name)+2+len(t) > 64 {
			return inputErrorf("allowed tool %q: use letters, digits, '_' and '-', with %q__ in front at most 64 characters", t, in.Name)
		}
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
