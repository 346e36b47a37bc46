package auth

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/organization"
	"github.com/toolgate/toolgate/ent/tenancy"
	"github.com/toolgate/toolgate/ent/user"
)

// Grant is what Bootstrap made: a new token for the user, shown once.
type Grant struct {
	Token          string `json:"token"`
	OrganizationID int    `json:"-"`
	UserID         int    `json:"-"`
}

// Bootstrap creates the organisation and the user, or reuses them when they
// exist, and issues a new API token for the user. The first user of a new
// organisation is its admin. It acts as the system: it makes the
// organisation a viewer would belong to.
func Bootstrap(ctx context.Context, client *ent.Client, org, name, department string) (*Grant, error) {
	ctx = tenancy.System(ctx)
	tx, err := client.Tx(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	g, err := bootstrap(ctx, tx.Client(), org, name, department)
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return g, nil
}

func bootstrap(ctx context.Context, c *ent.Client, org, name, department string) (*Grant, error) {
	o, err := c.Organization.Query().Where(organization.Name(org)).Only(ctx)
	newOrg := ent.IsNotFound(err)
	switch {
	case newOrg:
		o, err = c.Organization.Create().SetName(org).Save(ctx)
		if err != nil {
			return nil, fmt.Errorf("create organisation: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("find organisation: %w", err)
	}
	u, err := c.User.Query().Where(user.OrganizationID(o.ID), user.Name(name)).Only(ctx)
	switch {
	case ent.IsNotFound(err):
		u, err = c.User.Create().SetOrganizationID(o.ID).SetName(name).
			SetDepartment(department).SetAdmin(newOrg).Save(ctx)
		if err != nil {
			return nil, fmt.Errorf("create user: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("find user: %w", err)
	case department != "" && u.Department != department:
		if u, err = u.Update().SetDepartment(department).Save(ctx); err != nil {
			return nil, fmt.Errorf("update department: %w", err)
		}
	}
	token, hash, err := NewToken()
	if err != nil {
		return nil, fmt.Errorf("make token: %w", err)
	}
	if _, err := c.APIToken.Create().SetUserID(u.ID).SetHash(hash).SetHint(Hint(token)).
		SetName("bootstrap").Save(ctx); err != nil {
		return nil, fmt.Errorf("store token: %w", err)
	}
	return &Grant{Token: token, OrganizationID: o.ID, UserID: u.ID}, nil
}
