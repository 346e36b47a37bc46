// Package mcp is the client side of application tools: tools served by an
// organisation's MCP servers over Streamable HTTP and offered to the model as
// "<application>__<tool>". It keeps one session per server, lists each
// server's tools once per session, and tells the dispatcher whether a failed
// call may have reached the server, so retries can follow the tool's effect.
package mcp

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/ent/schematype"
)

// Family is the tool family of every application tool.
const Family = "application"

// Separator joins an application's name and its tool's name.
const Separator = "__"

// MaxNameLen is the longest tool name the model providers accept.
const MaxNameLen = 64

// maxAppNameLen leaves at least 30 characters of MaxNameLen for the tool.
const maxAppNameLen = 32

// maxDescriptionLen is the catalogue's ceiling on a description.
const maxDescriptionLen = 200

var (
	appNameRe  = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	toolNameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// Application is an MCP server registered for an organisation.
type Application struct {
	// Name prefixes the application's tools; see ValidName.
	Name string
	// URL is the server's Streamable HTTP endpoint.
	URL string
	// AllowedTools are the server's own tool names that may be offered.
	AllowedTools []string
}

// Allows reports whether tool, a server-side name, is on the allowlist.
func (a Application) Allows(tool string) bool {
	for _, t := range a.AllowedTools {
		if t == tool {
			return true
		}
	}
	return false
}

// Validate reports what would keep the application from being registered:
// a bad name or URL, or an allowed tool whose joined name no provider takes.
func (a Application) Validate() error {
	if !ValidName(a.Name) {
		return fmt.Errorf("application name %q: want 1 to %d of a-z, 0-9, '_' and '-', starting with a letter, without %q or a trailing '_'", a.Name, maxAppNameLen, Separator)
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return fmt.Errorf("application %s: parse url: %w", a.Name, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("application %s: url %q is not an absolute http or https url", a.Name, a.URL)
	}
	seen := make(map[string]bool, len(a.AllowedTools))
	for _, t := range a.AllowedTools {
		if _, err := ToolName(a.Name, t); err != nil {
			return fmt.Errorf("application %s: %w", a.Name, err)
		}
		if seen[t] {
			return fmt.Errorf("application %s: tool %q allowed twice", a.Name, t)
		}
		seen[t] = true
	}
	return nil
}

// ValidName reports whether name can prefix tool names. Beyond the character
// set, it may not contain the separator nor end with '_', so the first
// separator in a joined name always ends the application's name.
func ValidName(name string) bool {
	return len(name) <= maxAppNameLen &&
		appNameRe.MatchString(name) &&
		!strings.Contains(name, Separator) &&
		!strings.HasSuffix(name, "_")
}

// ToolName joins an application's name and a server-side tool name into the
// name the model sees, refusing what a provider would.
func ToolName(app, tool string) (string, error) {
	if !ValidName(app) {
		return "", fmt.Errorf("application name %q is not valid", app)
	}
	if !toolNameRe.MatchString(tool) {
		return "", fmt.Errorf("tool name %q: want only a-z, A-Z, 0-9, '_' and '-'", tool)
	}
	name := app + Separator + tool
	if len(name) > MaxNameLen {
		return "", fmt.Errorf("tool name %q is %d characters, over %d", name, len(name), MaxNameLen)
	}
	return name, nil
}

// SplitToolName splits a model-facing name into the application's name and
// the server-side tool name.
func SplitToolName(name string) (app, tool string, ok bool) {
	app, tool, ok = strings.Cut(name, Separator)
	if !ok || !ValidName(app) || tool == "" {
		return "", "", false
	}
	return app, tool, true
}

// Result is what a tool call returned.
type Result struct {
	// Content is the tool's structured content (KindJSON) when the server
	// gave some, else its text joined by newlines (KindText), else its
	// content blocks as JSON in MCP's wire form (KindMedia), because at
	// least one of them is not text (images, audio, blobs, links).
	Content []byte
	// IsError is set when the tool itself reported a failure; the model
	// reads Content to correct itself.
	IsError bool
	Kind    schematype.ResultKind
}

var (
	// ErrNeverReached marks a failure before the request reached the server
	// (it could not be connected to, or it did not know the session): the call
	// ran nowhere and may be sent again whatever its effect.
	ErrNeverReached = errors.New("request never reached the application")
	// ErrMayHaveReached marks a failure after the request may have reached
	// the server (a timeout, a cancelled wait, an HTTP 5xx, a broken
	// response): only calls that are safe to repeat may be sent again.
	ErrMayHaveReached = errors.New("request may have reached the application")
	// ErrNotAllowed refuses a call to a tool the application does not allow.
	ErrNotAllowed = errors.New("tool not allowed")
	// ErrClosed is returned once the pool is closed.
	ErrClosed = errors.New("pool closed")
)

// NeverReached reports whether err says the request never reached the
// server, so that sending it again cannot repeat an effect.
func NeverReached(err error) bool {
	return errors.Is(err, ErrNeverReached)
}

// MayHaveReached reports whether err says the request may have reached the
// server: sending it again is safe only for reads and idempotent calls.
func MayHaveReached(err error) bool {
	return errors.Is(err, ErrMayHaveReached)
}

// trimDescription cuts s to the catalogue's ceiling, at a word boundary when
// one is near, marking the cut.
func trimDescription(s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= maxDescriptionLen {
		return s
	}
	runes := []rune(s)[:maxDescriptionLen-1]
	cut := string(runes)
	if i := strings.LastIndexAny(cut, " \t\n"); i >= len(cut)*3/4 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " \t\n.,;:") + "…"
}
