package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/generated"
)

// PortalConfig is what lets a portal on its own origin use the API: which
// origins may call it, how people sign in, how fast they may call, and
// whether the schema is served for code generators.
type PortalConfig struct {
	// CORSOrigins are the origins a browser page may call from (HTTP,
	// websockets and Server-Sent Events alike); nil or empty: none but
	// the API's own.
	CORSOrigins *OriginList
	// OIDC accepts an OpenID Connect issuer's JWTs as bearer tokens; nil:
	// API tokens only.
	OIDC *auth.OIDC
	// Sessions, with OIDC, serves /auth/session and accepts its cookie;
	// nil: bearer tokens only.
	Sessions *auth.Sessions
	// RequestsPerSecond and TurnsAtOnce are the server's default rate
	// limits per person (`toolgate serve` starts with
	// DefaultRequestsPerSecond and DefaultTurnsAtOnce); 0: no limit but an
	// organisation's own.
	RequestsPerSecond, TurnsAtOnce int
	// SchemaEndpoint serves GET /graphql/schema.graphql, without a token.
	SchemaEndpoint bool
}

// csrfHeader is the header a cookie session's requests carry their CSRF
// token in.
const csrfHeader = auth.CSRFHeader

// portal wires the sign-in and the limits into the authenticator.
func (s *Server) portal() {
	p := s.cfg.Portal
	s.limits = newLimits(s.client, s.cfg.Log, s.cfg.DB.Dialect, s.cfg.DB.SQL, p.RequestsPerSecond, p.TurnsAtOnce)
	s.limits.present = s.presentBody
	s.auth.OIDC = p.OIDC
	s.auth.Sessions = p.Sessions
	s.auth.Limit = s.limits.middleware
}

// portalRoutes serves the schema and the sessions.
func (s *Server) portalRoutes() {
	p := s.cfg.Portal
	if p.SchemaEndpoint {
		s.mux.HandleFunc("GET /graphql/schema.graphql", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(SDL()))
		})
	}
	if p.Sessions != nil {
		s.mux.Handle("/auth/session", p.Sessions.Handler())
	}
}

// portalHandler wraps the whole API in its CORS rules.
func (s *Server) portalHandler(h http.Handler) http.Handler {
	return withCORS(s.cfg.Portal.CORSOrigins, h)
}

// presentBody is a GraphQL answer of one error, as the error presenter
// words it.
func (s *Server) presentBody(ctx context.Context, err error) []byte {
	b, _ := json.Marshal(map[string]any{"errors": gqlerror.List{s.presentError(ctx, err)}})
	return b
}

// presentLimited words a rate limit's refusal, and marks the request so
// its HTTP answer is a 429.
func presentLimited(ctx context.Context, e *gqlerror.Error, limited *RateLimitedError) *gqlerror.Error {
	noteLimited(ctx, limited)
	e = coded(e, limited.Error(), "RATE_LIMITED")
	e.Extensions["retryAfter"] = limited.retryAfterSeconds()
	return e
}

// SDL is the API's schema in the GraphQL schema language, as
// introspection shows it: what code generators read. The directives that
// only steer toolgate's own code generation are left out, as from
// introspection.
func SDL() string {
	sdlOnce.Do(func() {
		schema := generated.NewExecutableSchema(generated.Config{}).Schema()
		hideCodegenDirectives(schema)
		var b bytes.Buffer
		formatter.NewFormatter(&b, formatter.WithComments()).FormatSchema(withoutCodegenUses(schema))
		sdl = b.String()
	})
	return sdl
}

// withoutCodegenUses is a copy of schema whose types, fields, arguments
// and enum values carry no directive the schema does not define (the
// codegen ones hideCodegenDirectives dropped). The served schema is left
// as it is.
func withoutCodegenUses(schema *ast.Schema) *ast.Schema {
	keep := func(list ast.DirectiveList) ast.DirectiveList {
		var out ast.DirectiveList
		for _, d := range list {
			if _, ok := schema.Directives[d.Name]; ok || d.Name == "deprecated" || d.Name == "specifiedBy" || d.Name == "oneOf" {
				out = append(out, d)
			}
		}
		return out
	}
	args := func(list ast.ArgumentDefinitionList) ast.ArgumentDefinitionList {
		out := make(ast.ArgumentDefinitionList, len(list))
		for i, a := range list {
			c := *a
			c.Directives = keep(a.Directives)
			out[i] = &c
		}
		return out
	}
	cp := *schema
	cp.Types = make(map[string]*ast.Definition, len(schema.Types))
	for name, def := range schema.Types {
		d := *def
		d.Directives = keep(def.Directives)
		d.Fields = make(ast.FieldList, len(def.Fields))
		for i, f := range def.Fields {
			c := *f
			c.Directives = keep(f.Directives)
			c.Arguments = args(f.Arguments)
			d.Fields[i] = &c
		}
		d.EnumValues = make(ast.EnumValueList, len(def.EnumValues))
		for i, v := range def.EnumValues {
			c := *v
			c.Directives = keep(v.Directives)
			d.EnumValues[i] = &c
		}
		cp.Types[name] = &d
	}
	for _, root := range []**ast.Definition{&cp.Query, &cp.Mutation, &cp.Subscription} {
		if *root != nil {
			*root = cp.Types[(*root).Name]
		}
	}
	return &cp
}

var (
	sdlOnce sync.Once
	sdl     string
)
