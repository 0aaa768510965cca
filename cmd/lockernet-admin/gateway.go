package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// The gateway cloud API's operator commands:
//
//	lockernet-admin create-gateway-key -org NAME|ID [-rate-limit N] [-label L]
//	lockernet-admin revoke-gateway-key -id UUID | -prefix lnk_1a2b3c4d
//	lockernet-admin list-gateway-keys [-org NAME|ID]
//	lockernet-admin register-gateway -serial GW-0001 -location-id 4 -url http://10.0.0.5:8101 -secret-file gw.secret [-check]

// organization resolves -org: an organization id, or its exact name.
func organization(ctx context.Context, st *store.Store, ref string) (store.Organization, error) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		o, err := st.Organization(ctx, id)
		if err != nil {
			return store.Organization{}, fmt.Errorf("organization %d: %w", id, err)
		}
		return o, nil
	}
	o, err := st.OrganizationByName(ctx, ref)
	if err != nil {
		return store.Organization{}, fmt.Errorf("organization %q: %w", ref, err)
	}
	return o, nil
}

// storeAndOrganization opens the database and resolves -org in it.
func (e *adminEnv) storeAndOrganization(ctx context.Context, ref string) (*store.Store, store.Organization, error) {
	st, err := e.store(ctx)
	if err != nil {
		return nil, store.Organization{}, err
	}
	o, err := organization(ctx, st, ref)
	if err != nil {
		return nil, store.Organization{}, err
	}
	return st, o, nil
}

func createGatewayKey(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("create-gateway-key", flag.ContinueOnError)
	org := fs.String("org", "", "organization name or id (it must exist)")
	limit := fs.Int("rate-limit", 0, "requests per minute for this key (default: the service's, 120)")
	label := fs.String("label", "", "what the key is for")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *org == "" {
		return errors.New("create-gateway-key needs -org")
	}
	if *limit < 0 || *limit > 1_000_000 {
		return errors.New("-rate-limit must be between 1 and 1000000")
	}
	st, o, err := env.storeAndOrganization(ctx, *org)
	if err != nil {
		return err
	}
	var override *int
	if *limit > 0 {
		override = limit
	}
	key, k, err := st.IssueGatewayKey(ctx, o.ID, *label, override)
	if err != nil {
		return err
	}
	return json.NewEncoder(env.out).Encode(map[string]any{
		"id": k.ID, "key": key, "prefix": k.Prefix, "organization_id": o.ID, "organization": o.Name,
		"rate_limit": k.RateLimit, "note": "the key is shown once; send it as X-API-Key or Authorization: Bearer",
	})
}

func revokeGatewayKey(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("revoke-gateway-key", flag.ContinueOnError)
	id := fs.String("id", "", "the key's id")
	prefix := fs.String("prefix", "", "the key's prefix, e.g. lnk_1a2b3c4d (must match one active key)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*id == "") == (*prefix == "") {
		return errors.New("revoke-gateway-key needs exactly one of -id and -prefix")
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	var k store.GatewayKey
	if *id != "" {
		kid, perr := uuid.Parse(*id)
		if perr != nil {
			return fmt.Errorf("-id: %w", perr)
		}
		k, err = st.RevokeGatewayKey(ctx, kid)
	} else {
		k, err = st.RevokeGatewayKeyByPrefix(ctx, *prefix)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(env.out).Encode(map[string]any{"id": k.ID, "prefix": k.Prefix, "organization_id": k.OrganizationID,
		"revoked_at": k.RevokedAt, "note": "every apiserver refuses the key from its next request on"})
}

func listGatewayKeys(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("list-gateway-keys", flag.ContinueOnError)
	org := fs.String("org", "", "only this organization's keys (name or id)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	var orgID int64
	if *org != "" {
		o, err := organization(ctx, st, *org)
		if err != nil {
			return err
		}
		orgID = o.ID
	}
	keys, err := st.GatewayKeys(ctx, orgID)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		out = append(out, map[string]any{"id": k.ID, "prefix": k.Prefix, "label": k.Label, "organization_id": k.OrganizationID,
			"rate_limit": k.RateLimit, "created_at": k.CreatedAt, "revoked_at": k.RevokedAt, "last_used_at": k.LastUsedAt})
	}
	return json.NewEncoder(env.out).Encode(out)
}

func registerGateway(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("register-gateway", flag.ContinueOnError)
	serial := fs.String("serial", "", "the gateway's serial, e.g. GW-0001")
	locationID := fs.Int64("location-id", 0, "the location it serves (its organization is the location's)")
	base := fs.String("url", "", "base URL of its local API, e.g. http://10.0.0.5:8101")
	secretFile := fs.String("secret-file", "", "file holding the bearer secret of its local API")
	check := fs.Bool("check", false, "call the gateway's GET /health with the secret first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *serial == "" || *locationID <= 0 || *base == "" || *secretFile == "" {
		return errors.New("register-gateway needs -serial, -location-id, -url and -secret-file")
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-url %q is not an http(s) URL", *base)
	}
	raw, err := os.ReadFile(*secretFile)
	if err != nil {
		return fmt.Errorf("read secret file: %w", err)
	}
	secret := strings.TrimSpace(string(raw))
	if secret == "" {
		return errors.New("the secret file is empty")
	}
	if *check {
		if err := checkGateway(ctx, strings.TrimRight(*base, "/"), secret); err != nil {
			return err
		}
	}
	st, ring, err := env.storeAndKeyring(ctx)
	if err != nil {
		return err
	}
	g, err := st.UpsertGateway(ctx, store.NewGateway{Serial: *serial, LocationID: *locationID, BaseURL: strings.TrimRight(*base, "/"),
		SecretSealed: ring.Seal(keyring.GatewaySecretPurpose(*serial), []byte(secret))})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no location %d", *locationID)
	}
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("location %d already has another gateway", *locationID)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(env.out).Encode(map[string]any{"id": g.ID, "serial": g.Serial, "location_id": g.LocationID,
		"organization_id": g.OrganizationID, "url": g.BaseURL, "note": "the secret is stored sealed under the master key"})
}

func checkGateway(ctx context.Context, base, secret string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return fmt.Errorf("build health check: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("check gateway: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("check gateway: GET /health answered %d (is the secret right?)", resp.StatusCode)
	}
	return nil
}
