package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/offer"
	"github.com/toolgate/toolgate/tools"
)

// Application is what an application offers, as its MCP server listed it.
type Application struct {
	Name string
	// Allowed are the server-side tool names the organisation allows.
	Allowed []string
	// Tools are the allowed tools the server listed, named
	// "<application>__<tool>", with the server's description (cut to
	// MaxDescription) and input schema.
	Tools []tools.Definition
	// Err says why the server could not be asked; Tools is then empty.
	Err error
}

// Lister lists an application's allowed tools as its server offers them.
// The runtime's session pool does it, asking each server once per session.
type Lister func(ctx context.Context, app *ent.Application) ([]tools.Definition, error)

// Applications lists, through list, the applications of the caller's
// organisation (read through client, scoped to the caller) that a's
// allowlist names. A server that cannot be asked is kept with its error: its
// tools are known by name only. A nil list asks none.
func Applications(ctx context.Context, client *ent.Client, a *offer.Agent, list Lister) ([]Application, error) {
	if a == nil || !slices.ContainsFunc(a.Tools, func(n string) bool { return strings.Contains(n, separator) }) {
		return nil, nil
	}
	rows, err := client.Application.Query().All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load applications: %w", err)
	}
	var out []Application
	for _, row := range rows {
		if !slices.ContainsFunc(a.Tools, func(n string) bool { return strings.HasPrefix(n, row.Name+separator) }) {
			continue
		}
		app := Application{Name: row.Name, Allowed: row.AllowedTools}
		if list == nil {
			app.Err = errNoApplications
		} else {
			app.Tools, app.Err = list(ctx, row)
		}
		out = append(out, app)
	}
	return out, nil
}

var errNoApplications = fmt.Errorf("this server does not reach applications")

// appTool is one application tool the agent allowlists.
type appTool struct {
	name        string
	application string
	// def is the server's definition; nil when the server could not be asked.
	def *tools.Definition
	err error
}

// appTools returns the application tools a's turns may be offered, in
// allowlist order: each "<application>__<tool>" the agent lists and the
// application allows. A tool its server answered without is not offered,
// so it is left out; one whose server could not be asked is kept, by name.
func appTools(a *offer.Agent, apps []Application) []appTool {
	if a == nil {
		return nil
	}
	var out []appTool
	for _, name := range a.Tools {
		for _, app := range apps {
			tool, ok := strings.CutPrefix(name, app.Name+separator)
			if !ok || !slices.Contains(app.Allowed, tool) {
				continue
			}
			if app.Err != nil {
				out = append(out, appTool{name: name, application: app.Name, err: app.Err})
				continue
			}
			if i := slices.IndexFunc(app.Tools, func(d tools.Definition) bool { return d.Name == name }); i >= 0 {
				out = append(out, appTool{name: name, application: app.Name, def: &app.Tools[i]})
			}
		}
	}
	return out
}

// parameters is a definition's argument schema as the model receives it.
func parameters(d tools.Definition) Schema {
	var wire struct {
		Parameters json.RawMessage `json:"parameters"`
	}
	// Wire is JSON that Definition itself marshalled.
	_ = json.Unmarshal(d.Wire(), &wire)
	return Schema(wire.Parameters)
}
