// Package graph is toolgate's GraphQL API: schema files, resolvers, and the
// HTTP server around them.
package graph

import (
	"context"
	"log/slog"
	"time"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/runtime/loop"
	"github.com/toolgate/toolgate/runtime/mcp"
	"github.com/toolgate/toolgate/tools"
	"github.com/toolgate/toolgate/tools/artifact/browser"
	"github.com/toolgate/toolgate/tools/catalog"
	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/document"
	"github.com/toolgate/toolgate/tools/history"
	"github.com/toolgate/toolgate/tools/memory"
	"github.com/toolgate/toolgate/tools/web"
)

// MaxPage is the largest page a connection serves; DefaultPage is what a
// connection serves when the client names no size.
const (
	MaxPage     = 100
	DefaultPage = 50
)

// Resolver is the one place dependencies are injected.
type Resolver struct {
	// Client is the API's ent client, with the scope interceptors installed.
	Client *ent.Client
	// Dialect is the database's SQL dialect, for the statements ent does
	// not write (deleteConversation's purge).
	Dialect string
	Log     *slog.Logger
	// Runner runs turns; nil when the server only serves the data.
	Runner *loop.Runner
	// Web runs the web tools; nil when the server has no web provider.
	Web *web.Service
	// Sandbox runs run_code's children.
	Sandbox *code.Sandbox
	// Apps lists applications' tools; nil knows them by name only.
	Apps *mcp.Pool
	// Documents processes, searches and reads documents and attachments;
	// nil stores uploads that nothing processes.
	Documents *document.Service
	// Memory saves, searches and forgets what the assistant remembers.
	Memory *memory.Service
	// History searches what people wrote in their other conversations.
	History *history.Searcher
	// Browser renders artifacts for the review tools; nil: no browser was
	// found, and they are not offered.
	Browser *browser.Pool
	// reads shares what a turn event's subscribers read of it
	// (turn_events.go).
	reads eventReads
	// limits are the server's rate limits (ratelimit.go); nil: none.
	limits *limits
}

// appListTimeout bounds asking one application's server for its tools:
// discovery and the catalogue answer without it rather than wait.
const appListTimeout = 10 * time.Second

// lister asks applications' servers for their tools through the pool,
// which asks each server once per session; nil without a pool.
func (r *Resolver) lister() catalog.Lister {
	if r.Apps == nil {
		return nil
	}
	return func(ctx context.Context, app *ent.Application) ([]tools.Definition, error) {
		ctx, cancel := context.WithTimeout(ctx, appListTimeout)
		defer cancel()
		return r.Apps.Tools(ctx, mcp.Application{Name: app.Name, URL: app.URL, AllowedTools: app.AllowedTools})
	}
}

// client returns the transaction's client inside a mutation (the
// Transactioner opens one for each) and the scoped client elsewhere.
func (r *Resolver) client(ctx context.Context) *ent.Client {
	if c := ent.FromContext(ctx); c != nil {
		return c
	}
	return r.Client
}

// EncodeID returns the opaque global id of a database id, as the API
// shows it.
func EncodeID(id int) string { return gid.Encode(id) }
