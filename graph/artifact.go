package graph

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/ent"
	entartifact "github.com/toolgate/toolgate/ent/artifact"
	"github.com/toolgate/toolgate/ent/artifactversion"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/gid"
	"github.com/toolgate/toolgate/tools/artifact"
)

// ArtifactCSP is the Content-Security-Policy a rendered artifact is served
// with: a sandbox of its own origin, scripts and styles only inline,
// images and fonts only as data: URLs, and no network for anything in it.
const ArtifactCSP = "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
	"img-src data:; font-src data:; media-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'; " +
	"frame-ancestors 'self'"

// notFoundBody is the route's answer to a version the caller cannot
// reach, or that does not exist: the same bytes either way.
const notFoundBody = `{"errors":[{"message":"not found","extensions":{"code":"NOT_FOUND"}}]}`

// draftBody is the route's answer to a draft version the caller can
// reach: 409, with what to do.
func draftBody(version int) string {
	m, _ := json.Marshal(artifact.DraftDownloadMessage(version)) // a string always marshals
	return `{"errors":[{"message":` + string(m) + `,"extensions":{"code":"DRAFT"}}]}`
}

// artifactMediaTypes are how each kind is served.
var artifactMediaTypes = map[entartifact.Kind]string{
	entartifact.KindHTML:     "text/html; charset=utf-8",
	entartifact.KindSvg:      "image/svg+xml; charset=utf-8",
	entartifact.KindMarkdown: "text/markdown; charset=utf-8",
}

// artifactVersionHandler serves GET /artifacts/{id}/versions/{n}: one
// version as its kind's media type, for the portal to show in a sandboxed
// frame. It reads through the scoped client like the artifacts query, so a
// version of another's conversation answers as one that never existed. A
// draft (an html or svg version not yet inspected) the caller can reach
// answers 409 DRAFT: visual files need inspection before saving. A turn's
// scope token opens only tool fields, not this route.
func artifactVersionHandler(client *ent.Client, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		v, err := findArtifactVersion(r.Context(), client, r.PathValue("id"), r.PathValue("n"))
		if err != nil {
			if !errors.Is(err, auth.ErrNotFound) {
				log.ErrorContext(r.Context(), "artifact version", "err", err)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, `{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}]}`)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, notFoundBody)
			return
		}
		h := w.Header()
		if artifact.Draft(v.Edges.Artifact.Kind, v) {
			// Visual files need inspection before saving: the portal
			// downloads what inspect_artifact has rendered, never a draft.
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "private, no-store")
			w.WriteHeader(http.StatusConflict)
			if r.Method != http.MethodHead {
				_, _ = io.WriteString(w, draftBody(v.Number))
			}
			return
		}
		h.Set("Content-Type", artifactMediaTypes[v.Edges.Artifact.Kind])
		h.Set("Content-Security-Policy", ArtifactCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "private, no-store")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = io.WriteString(w, v.Content)
	})
}

// artifacts is a conversation's artifacts through the request's client:
// inside a mutation, its transaction's. Without a browser a draft's note
// says none can inspect it.
func (r *Resolver) artifacts(ctx context.Context, conv int) *artifact.Store {
	s := artifact.New(r.client(ctx), conv)
	if r.Browser == nil {
		s.Unreviewed()
	}
	return s
}

// findArtifactVersion reads version n of artifact id as the request's
// viewer; anything out of reach, malformed or absent is auth.ErrNotFound.
func findArtifactVersion(ctx context.Context, client *ent.Client, id, n string) (*ent.ArtifactVersion, error) {
	viewer, err := auth.FromContext(ctx)
	if err != nil || viewer.Scoped() {
		return nil, auth.ErrNotFound
	}
	artifactID, err := gid.Decode(id)
	if err != nil {
		return nil, auth.ErrNotFound
	}
	number, err := strconv.Atoi(n)
	if err != nil || number < 1 {
		return nil, auth.ErrNotFound
	}
	v, err := client.ArtifactVersion.Query().
		Where(artifactversion.ArtifactID(artifactID), artifactversion.Number(number)).
		WithArtifact().
		Only(ctx)
	if ent.IsNotFound(err) {
		return nil, auth.ErrNotFound
	}
	return v, err
}
