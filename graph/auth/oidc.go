package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/organization"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/user"
)

// OIDCConfig is the OpenID Connect issuer whose signed JWTs are accepted
// as bearer tokens, and how a person signing in is placed.
type OIDCConfig struct {
	// Issuer is the issuer's URL, as its discovery document names it.
	Issuer string
	// Audience is what a token's aud must contain: the client id the
	// portal signs in with (ID tokens) or the API's resource (access
	// tokens).
	Audience string
	// Organization is the organisation, by name, every person of this
	// issuer belongs to; OrgClaim instead names the claim that gives it.
	// One of the two.
	Organization, OrgClaim string
	// DepartmentClaim names the claim that gives a person's department;
	// "" is "department".
	DepartmentClaim string
	// NoProvision refuses the first sign-in of a person toolgate does not
	// know yet, instead of creating them in their organisation.
	NoProvision bool
	// Skew is the clock difference tolerated on exp, nbf and iat; 0 is
	// DefaultSkew.
	Skew time.Duration
	// Client fetches the discovery document and the keys; nil is a client
	// with a 10 s timeout.
	Client *http.Client
	// RefreshEvery is the least time between two fetches of the issuer's
	// keys for a key id it did not publish; 0 is 10 s.
	RefreshEvery time.Duration
	// Clock tells the time; nil is time.Now.
	Clock func() time.Time
}

// DefaultSkew is how far a token's times may be off the server's clock.
const DefaultSkew = time.Minute

// OIDC verifies an issuer's JWTs (through go-oidc: the discovery document,
// issuer and audience; keys from the issuer's JWKS, see keySet) and turns
// them into viewers, provisioning a person at their first sign-in.
type OIDC struct {
	cfg    OIDCConfig
	client *ent.Client
	log    *slog.Logger
	keys   *keySet

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	tried    time.Time // last discovery that failed
}

// NewOIDC checks cfg and returns its verifier. The issuer is first asked
// for its discovery document when the first token arrives, so a server
// starts while its issuer is out of reach.
func NewOIDC(client *ent.Client, log *slog.Logger, cfg OIDCConfig) (*OIDC, error) {
	cfg.Issuer = strings.TrimSpace(cfg.Issuer)
	switch {
	case cfg.Issuer == "":
		return nil, errors.New("OpenID Connect: no issuer")
	case !strings.HasPrefix(cfg.Issuer, "https://") && !strings.HasPrefix(cfg.Issuer, "http://"):
		return nil, fmt.Errorf("OpenID Connect issuer %q is not an http(s) URL", cfg.Issuer)
	case strings.TrimSpace(cfg.Audience) == "":
		return nil, errors.New("OpenID Connect: an issuer needs an audience (TOOLGATE_OIDC_AUDIENCE): the client id or resource its tokens are for")
	case (cfg.Organization == "") == (cfg.OrgClaim == ""):
		return nil, errors.New("OpenID Connect: name the organisation (TOOLGATE_OIDC_ORGANIZATION) or the claim that gives it (TOOLGATE_OIDC_ORG_CLAIM), one of the two")
	}
	if cfg.DepartmentClaim == "" {
		cfg.DepartmentClaim = "department"
	}
	if cfg.Skew <= 0 {
		cfg.Skew = DefaultSkew
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &OIDC{cfg: cfg, client: client, log: log}, nil
}

// Issuer is the issuer's URL.
func (o *OIDC) Issuer() string { return o.cfg.Issuer }

// errIssuerUnreachable is an issuer whose discovery document could not be
// read: the request is answered 503, not 401, as the token may be good.
var errIssuerUnreachable = errors.New("the OpenID Connect issuer is out of reach")

// verifierFor discovers the issuer once, and again at most every 10 s
// while it fails.
func (o *OIDC) verifierFor(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.verifier != nil {
		return o.verifier, nil
	}
	now := o.cfg.Clock()
	if !o.tried.IsZero() && now.Sub(o.tried) < 10*time.Second {
		return nil, errIssuerUnreachable
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), o.cfg.Client), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, o.cfg.Issuer)
	if err != nil {
		o.tried = now
		o.log.WarnContext(ctx, "OpenID Connect discovery", "issuer", o.cfg.Issuer, "err", err)
		return nil, fmt.Errorf("%w: %v", errIssuerUnreachable, err)
	}
	var meta struct {
		JWKSURI string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURI == "" {
		o.tried = now
		return nil, fmt.Errorf("%w: discovery names no jwks_uri", errIssuerUnreachable)
	}
	// The issuer's algorithms that are public-key signatures; "none" and
	// HMAC are never among them, whatever the issuer advertises.
	var algs []string
	for _, a := range signingAlgs {
		if len(meta.Algs) == 0 || slices.Contains(meta.Algs, string(a)) {
			algs = append(algs, string(a))
		}
	}
	o.keys = &keySet{url: meta.JWKSURI, client: o.cfg.Client, refreshEvery: o.cfg.RefreshEvery, maxAge: time.Hour, now: o.cfg.Clock}
	o.verifier = oidc.NewVerifier(o.cfg.Issuer, o.keys, &oidc.Config{
		ClientID:             o.cfg.Audience,
		SupportedSigningAlgs: algs,
		// exp, nbf and iat are checked below, with one small skew for
		// the three (go-oidc allows none on exp and five minutes on nbf).
		SkipExpiryCheck: true,
	})
	o.tried = time.Time{}
	return o.verifier, nil
}

// LooksLikeJWT reports whether a bearer token is shaped like a JWS in
// compact form (three base64url parts, the first a JSON object), so API
// and scope tokens are never sent to the issuer's verifier.
func LooksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2 && strings.HasPrefix(token, "eyJ")
}

// claims are what toolgate reads of a token.
type claims struct {
	Subject           string         `json:"sub"`
	Name              string         `json:"name"`
	PreferredUsername string         `json:"preferred_username"`
	Email             string         `json:"email"`
	Exp               *json.Number   `json:"exp"`
	Nbf               *json.Number   `json:"nbf"`
	Iat               *json.Number   `json:"iat"`
	Raw               map[string]any `json:"-"`
}

// Resolve verifies a JWT of the issuer and returns the viewer of the
// person it names, provisioning them at their first sign-in and updating
// their name and department at later ones. A token that fails any check
// is ErrNotFound, like any bad token.
func (o *OIDC) Resolve(ctx context.Context, raw string) (*Viewer, error) {
	u, err := o.SignIn(ctx, raw)
	if err != nil {
		return nil, err
	}
	return &Viewer{OrganizationID: u.OrganizationID, UserID: u.ID, Admin: u.Admin}, nil
}

// SignIn is Resolve, returning the user.
func (o *OIDC) SignIn(ctx context.Context, raw string) (*ent.User, error) {
	v, err := o.verifierFor(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		o.log.InfoContext(ctx, "OpenID Connect token refused", "err", err)
		return nil, ErrNotFound
	}
	var c claims
	if err := tok.Claims(&c); err != nil {
		return nil, ErrNotFound
	}
	if err := tok.Claims(&c.Raw); err != nil {
		return nil, ErrNotFound
	}
	err = o.checkTimes(c)
	if err != nil {
		o.log.InfoContext(ctx, "OpenID Connect token refused", "err", err)
		return nil, ErrNotFound
	}
	if c.Subject == "" || len(c.Subject) > 500 {
		return nil, ErrNotFound
	}
	u, err := o.user(ctx, tok.Issuer, c)
	if err != nil {
		return nil, err
	}
	return u, nil
}

// checkTimes checks exp (required), nbf and iat against the clock, each
// with the skew.
func (o *OIDC) checkTimes(c claims) error {
	now := o.cfg.Clock()
	at := func(n *json.Number) (time.Time, error) {
		f, err := n.Float64()
		if err != nil {
			return time.Time{}, fmt.Errorf("not a time: %q", n.String())
		}
		return time.Unix(0, int64(f*1e9)), nil
	}
	if c.Exp == nil {
		return errors.New("no exp")
	}
	exp, err := at(c.Exp)
	if err != nil {
		return err
	}
	if !now.Before(exp.Add(o.cfg.Skew)) {
		return fmt.Errorf("expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if c.Nbf != nil {
		nbf, err := at(c.Nbf)
		if err != nil {
			return err
		}
		if now.Add(o.cfg.Skew).Before(nbf) {
			return fmt.Errorf("not valid before %s", nbf.UTC().Format(time.RFC3339))
		}
	}
	if c.Iat != nil {
		iat, err := at(c.Iat)
		if err != nil {
			return err
		}
		if now.Add(o.cfg.Skew).Before(iat) {
			return fmt.Errorf("issued in the future, at %s", iat.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// stringClaim is a claim's value as text: a string, or the one string of a
// list.
func stringClaim(raw map[string]any, name string) string {
	switch v := raw[name].(type) {
	case string:
		return strings.TrimSpace(v)
	case []any:
		if len(v) == 1 {
			if s, ok := v[0].(string); ok {
				return strings.TrimSpace(s)
			}
		}
	}
	return ""
}

// displayName is the person's name as the model is told it.
func displayName(c claims) string {
	for _, n := range []string{c.Name, c.PreferredUsername, c.Email} {
		if n = strings.TrimSpace(n); n != "" {
			return clip(n, 200)
		}
	}
	return clip("user "+c.Subject, 200)
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// user finds the person the token names by issuer and subject, or
// provisions them. Their organisation is fixed at the first sign-in: a
// later token naming another one is refused.
func (o *OIDC) user(ctx context.Context, issuer string, c claims) (*ent.User, error) {
	ctx = tenancy.System(ctx)
	orgName := o.cfg.Organization
	if o.cfg.OrgClaim != "" {
		orgName = stringClaim(c.Raw, o.cfg.OrgClaim)
	}
	name := displayName(c)
	dept := clip(stringClaim(c.Raw, o.cfg.DepartmentClaim), 200)
	for attempt := 0; ; attempt++ {
		u, err := o.client.User.Query().
			Where(user.OidcIssuer(issuer), user.OidcSubject(c.Subject)).
			WithOrganization().Only(ctx)
		switch {
		case err == nil:
			if u.DeactivatedAt != nil || orgName == "" || u.Edges.Organization.Name != orgName {
				if u.DeactivatedAt == nil {
					o.log.WarnContext(ctx, "OpenID Connect sign-in refused: the token names another organisation than the user's", "organization", orgName)
				}
				return nil, ErrNotFound
			}
			return o.refresh(ctx, u, name, dept, c)
		case !ent.IsNotFound(err):
			return nil, fmt.Errorf("look up user: %w", err)
		}
		if o.cfg.NoProvision {
			o.log.InfoContext(ctx, "OpenID Connect sign-in refused: not provisioned, and provisioning is off")
			return nil, ErrNotFound
		}
		if orgName == "" {
			o.log.WarnContext(ctx, "OpenID Connect sign-in refused: the token names no organisation", "claim", o.cfg.OrgClaim)
			return nil, ErrNotFound
		}
		org, err := o.client.Organization.Query().Where(organization.Name(orgName)).Only(ctx)
		if ent.IsNotFound(err) {
			// Organisations are made by the server's operator, never
			// by a claim.
			o.log.WarnContext(ctx, "OpenID Connect sign-in refused: no such organisation", "organization", orgName)
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("look up organisation: %w", err)
		}
		u, err = o.create(ctx, org.ID, issuer, name, dept, c)
		if ent.IsConstraintError(err) && attempt == 0 {
			continue // signed in twice at once: the other request made them
		}
		if err != nil {
			return nil, err
		}
		o.log.InfoContext(ctx, "OpenID Connect: user provisioned", "organization", orgName, "user", u.ID)
		return u, nil
	}
}

// create makes the user, with a name of their own in the organisation: a
// name another person already has gets their email or a part of their
// subject after it.
func (o *OIDC) create(ctx context.Context, orgID int, issuer, name, dept string, c claims) (*ent.User, error) {
	var err error
	for _, n := range names(name, c) {
		var u *ent.User
		u, err = o.client.User.Create().SetOrganizationID(orgID).SetName(n).SetDepartment(dept).
			SetOidcIssuer(issuer).SetOidcSubject(c.Subject).Save(ctx)
		if err == nil {
			return u, nil
		}
		if !ent.IsConstraintError(err) {
			return nil, fmt.Errorf("provision user: %w", err)
		}
		// The subject's own row (signed in twice at once) or the name
		// taken since: the next name, or the caller looks again.
		if exists, qerr := o.client.User.Query().Where(user.OidcIssuer(issuer), user.OidcSubject(c.Subject)).Exist(ctx); qerr == nil && exists {
			return nil, err
		}
	}
	return nil, err
}

// names are the names to try for a person, the plain one first unless
// another user of the organisation has it.
func names(name string, c claims) []string {
	tag := c.Email
	if tag == "" || tag == name {
		tag = c.Subject
		if len(tag) > 12 {
			tag = tag[len(tag)-12:]
		}
	}
	out := []string{name, clip(name, 180) + " (" + clip(tag, 17) + ")"}
	for i := 2; i <= 4; i++ {
		out = append(out, fmt.Sprintf("%s (%s %d)", clip(name, 170), clip(tag, 17), i))
	}
	return out
}

// refresh updates the person's name and department to the token's, when
// they changed; a name another person of the organisation has keeps the
// disambiguated form.
func (o *OIDC) refresh(ctx context.Context, u *ent.User, name, dept string, c claims) (*ent.User, error) {
	names := names(name, c)
	if slices.Contains(names, u.Name) && u.Department == dept {
		if u.Name == name {
			return u, nil
		}
		// Disambiguated at creation: the plain name may be free now.
		taken, err := o.client.User.Query().Where(user.OrganizationID(u.OrganizationID), user.Name(name), user.IDNEQ(u.ID)).Exist(ctx)
		if err != nil || taken {
			return u, nil //nolint:nilerr // the old name serves
		}
	}
	for _, n := range names {
		updated, err := u.Update().SetName(n).SetDepartment(dept).Save(ctx)
		if err == nil {
			return updated, nil
		}
		if !ent.IsConstraintError(err) {
			return nil, fmt.Errorf("update user from token: %w", err)
		}
	}
	// Every form of the name is someone else's: the old one stays.
	return u, nil
}
