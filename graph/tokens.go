package graph

import (
	"context"
	"strings"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/apitoken"
	"github.com/toolgate/toolgate/graph/auth"
	"github.com/toolgate/toolgate/graph/model"
)

func (r *Resolver) createAPIToken(ctx context.Context, in model.CreateAPITokenInput) (*model.CreatedAPIToken, error) {
	v, err := apiViewer(ctx)
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return nil, inputErrorf("name is empty")
	}
	if in.ExpiresAt != nil && !in.ExpiresAt.After(r.now()) {
		return nil, inputErrorf("expiresAt is not in the future")
	}
	token, hash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	t, err := r.client(ctx).APIToken.Create().
		SetUserID(v.UserID).SetName(name).SetHash(hash).SetHint(auth.Hint(token)).
		SetNillableExpiresAt(in.ExpiresAt).
		Save(ctx)
	if err != nil {
		return nil, err
	}
	return &model.CreatedAPIToken{Token: token, APIToken: t}, nil
}

// revokeAPIToken revokes a token the caller reaches (the scope
// interceptors decide: one's own, or an admin's organisation's). Revoking
// twice keeps the first time.
func (r *Resolver) revokeAPIToken(ctx context.Context, id int) (*ent.APIToken, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	c := r.client(ctx)
	t, err := c.APIToken.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.RevokedAt != nil {
		return t, nil
	}
	return t.Update().SetRevokedAt(r.now()).Save(ctx)
}

func (r *Resolver) apiTokens(ctx context.Context) ([]*ent.APIToken, error) {
	if _, err := apiViewer(ctx); err != nil {
		return nil, err
	}
	return r.Client.APIToken.Query().Order(ent.Desc(apitoken.FieldCreatedAt), ent.Desc(apitoken.FieldID)).All(ctx)
}
