package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/lockernet/lockernet/internal/store"
)

// createAppKey makes an app engine key, organization-wide (an admin key) unless
// -sub-organization is given:
//
//	lockernet-admin create-app-key -org NAME|ID [-sub-organization ID]
func createAppKey(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("create-app-key", flag.ContinueOnError)
	org := fs.String("org", "", "organization name or id (it must exist)")
	sub := fs.Int64("sub-organization", 0, "sub-organization id (default: an organization-wide admin key)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *org == "" {
		return errors.New("create-app-key needs -org")
	}
	st, o, err := env.storeAndOrganization(ctx, *org)
	if err != nil {
		return err
	}
	k := store.AppKey{OrganizationID: o.ID}
	if *sub != 0 {
		ok, err := st.SubOrganizationOf(ctx, o.ID, *sub)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("sub-organization %d is not of organization %d", *sub, o.ID)
		}
		k.SubOrganizationID = sub
	}
	key, k, err := st.CreateAppKey(ctx, k)
	if err != nil {
		return err
	}
	return json.NewEncoder(env.out).Encode(map[string]any{"api_key": key, "id": k.ID, "organization_id": o.ID,
		"sub_organization_id": k.SubOrganizationID, "note": "the key is shown once"})
}
