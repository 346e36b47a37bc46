package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/toolgate/toolgate/db"
	"github.com/toolgate/toolgate/graph"
	"github.com/toolgate/toolgate/graph/auth"
)

// portalFlags are serve's settings for a portal on its own origin: CORS,
// OpenID Connect sign-in, cookie sessions, rate limits and the schema
// endpoint.
type portalFlags struct {
	corsOrigins                  string
	issuer, audience             string
	organization, orgClaim, dept string
	provision                    bool
	sessions                     bool
	sessionTTL                   time.Duration
	rps, turns                   int
	schemaEndpoint               bool
}

func (p *portalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.corsOrigins, "cors-origins", env("TOOLGATE_CORS_ORIGINS", ""), "comma-separated origins a browser page may call from, exact or with a '*' label (https://*.example.com); HTTP, websockets and SSE alike (env TOOLGATE_CORS_ORIGINS; default: none)")
	fs.StringVar(&p.issuer, "oidc-issuer", env("TOOLGATE_OIDC_ISSUER", ""), "OpenID Connect issuer whose signed JWTs are accepted as bearer tokens (env TOOLGATE_OIDC_ISSUER)")
	fs.StringVar(&p.audience, "oidc-audience", env("TOOLGATE_OIDC_AUDIENCE", ""), "the audience the issuer's tokens must carry (env TOOLGATE_OIDC_AUDIENCE)")
	fs.StringVar(&p.organization, "oidc-organization", env("TOOLGATE_OIDC_ORGANIZATION", ""), "the organisation, by name, a person signing in through the issuer belongs to (env TOOLGATE_OIDC_ORGANIZATION)")
	fs.StringVar(&p.orgClaim, "oidc-org-claim", env("TOOLGATE_OIDC_ORG_CLAIM", ""), "the claim that names a person's organisation, instead of --oidc-organization (env TOOLGATE_OIDC_ORG_CLAIM)")
	fs.StringVar(&p.dept, "oidc-department-claim", env("TOOLGATE_OIDC_DEPARTMENT_CLAIM", "department"), "the claim that gives a person's department (env TOOLGATE_OIDC_DEPARTMENT_CLAIM)")
	fs.BoolVar(&p.provision, "oidc-provision", env("TOOLGATE_OIDC_PROVISION", "true") != "false", "create a person at their first sign-in, in the organisation the token names (env TOOLGATE_OIDC_PROVISION; false: refuse people not known yet)")
	fs.BoolVar(&p.sessions, "sessions", env("TOOLGATE_SESSIONS", "") == "true", "serve /auth/session: an OpenID Connect sign-in exchanged for an HTTP-only cookie session with CSRF protection, for a portal on the same site (env TOOLGATE_SESSIONS=true)")
	fs.DurationVar(&p.sessionTTL, "session-ttl", durationEnv("TOOLGATE_SESSION_TTL", auth.DefaultSessionTTL), "how long a cookie session lasts (env TOOLGATE_SESSION_TTL)")
	fs.IntVar(&p.rps, "rate-requests-per-second", intEnv("TOOLGATE_RATE_REQUESTS_PER_SECOND", graph.DefaultRequestsPerSecond), "requests a second per person, the default of organisations that set none (env TOOLGATE_RATE_REQUESTS_PER_SECOND; 0: no limit)")
	fs.IntVar(&p.turns, "rate-turns-at-once", intEnv("TOOLGATE_RATE_TURNS_AT_ONCE", graph.DefaultTurnsAtOnce), "turns running at once per person, the default of organisations that set none (env TOOLGATE_RATE_TURNS_AT_ONCE; 0: no limit)")
	schemaDefault := "true"
	if env("TOOLGATE_ENV", "") == "production" {
		schemaDefault = "false"
	}
	fs.BoolVar(&p.schemaEndpoint, "schema-endpoint", env("TOOLGATE_SCHEMA_ENDPOINT", schemaDefault) == "true", "serve GET /graphql/schema.graphql without a token, for code generators (env TOOLGATE_SCHEMA_ENDPOINT; default: on, off when TOOLGATE_ENV=production)")
}

// config turns the flags into the server's portal configuration.
func (p *portalFlags) config(d *db.DB, log *slog.Logger) (graph.PortalConfig, error) {
	origins, err := graph.ParseOrigins(p.corsOrigins)
	if err != nil {
		return graph.PortalConfig{}, err
	}
	if p.rps < 0 || p.turns < 0 {
		return graph.PortalConfig{}, errors.New("rate limits are 0 (none) or more")
	}
	cfg := graph.PortalConfig{CORSOrigins: origins, RequestsPerSecond: p.rps, TurnsAtOnce: p.turns, SchemaEndpoint: p.schemaEndpoint}
	if p.issuer == "" {
		if p.sessions {
			return graph.PortalConfig{}, errors.New("sessions are made from OpenID Connect sign-ins: set TOOLGATE_OIDC_ISSUER too")
		}
		return cfg, nil
	}
	cfg.OIDC, err = auth.NewOIDC(d.Client(), log, auth.OIDCConfig{
		Issuer: p.issuer, Audience: p.audience, Organization: p.organization, OrgClaim: p.orgClaim,
		DepartmentClaim: p.dept, NoProvision: !p.provision,
	})
	if err != nil {
		return graph.PortalConfig{}, err
	}
	if p.sessions {
		if cfg.Sessions, err = auth.NewSessions(d.Client(), cfg.OIDC, p.sessionTTL, log); err != nil {
			return graph.PortalConfig{}, err
		}
	}
	return cfg, nil
}

// schema prints the API's schema (SDL), for code generators.
func schema(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("schema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, err := fmt.Fprint(stdout, graph.SDL())
	return err
}
