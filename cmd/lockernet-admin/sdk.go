package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// client changes a service-provider client's mobile SDK settings:
//
//	lockernet-admin client sdk-claims -client ID (-claims sync_packet,locker_delivery | -default)
//
// The claims are those the client's apps may open tower sessions with (DESIGN §4.8); -default
// makes it follow LOCKERNET_SDK_DEFAULT_CLAIMS again.
//
//	lockernet-admin client disable -client ID
//	lockernet-admin client enable -client ID
//	lockernet-admin client rate-limit -client ID (-tower N -token N | -default)
//
// A disabled client gets no new tokens; the tokens it holds and the app keys it made stop
// working within two seconds on every apiserver.
func clientCmd(ctx context.Context, env *adminEnv, args []string) error {
	const usage = "usage: client sdk-claims -client ID (-claims c1,c2 | -default) | client disable -client ID | client enable -client ID | client rate-limit -client ID (-tower N -token N | -default)"
	if len(args) > 0 && args[0] == "rate-limit" {
		fs := flag.NewFlagSet("client rate-limit", flag.ContinueOnError)
		id := fs.String("client", "", "the client id")
		tower := fs.Int("tower", 0, "tower API requests per minute (1..1000000)")
		token := fs.Int("token", 0, "token requests per minute (1..1000000)")
		def := fs.Bool("default", false, "go back to the settings' defaults")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *id == "" || (*def == (*tower > 0 || *token > 0)) {
			return errors.New("give -client and either -tower/-token or -default")
		}
		var tw, tk *int
		if *tower > 0 {
			tw = tower
		}
		if *token > 0 {
			tk = token
		}
		st, err := env.store(ctx)
		if err != nil {
			return err
		}
		if err := st.SetClientRateLimits(ctx, *id, tw, tk); err != nil {
			return fmt.Errorf("client %q: %w", *id, err)
		}
		return json.NewEncoder(env.out).Encode(map[string]any{"clientId": *id, "towerRateLimit": tw, "tokenRateLimit": tk})
	}
	if len(args) > 0 && (args[0] == "disable" || args[0] == "enable") {
		fs := flag.NewFlagSet("client "+args[0], flag.ContinueOnError)
		id := fs.String("client", "", "the client id")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *id == "" {
			return errors.New("give -client")
		}
		st, err := env.store(ctx)
		if err != nil {
			return err
		}
		disabled := args[0] == "disable"
		if err := st.SetClientDisabled(ctx, *id, disabled); err != nil {
			return fmt.Errorf("client %q: %w", *id, err)
		}
		return json.NewEncoder(env.out).Encode(map[string]any{"clientId": *id, "disabled": disabled})
	}
	if len(args) == 0 || args[0] != "sdk-claims" {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("client sdk-claims", flag.ContinueOnError)
	id := fs.String("client", "", "the client id")
	list := fs.String("claims", "", "comma-separated claims: sync_packet, locker_pickup, locker_delivery, owner, technician, developer")
	def := fs.Bool("default", false, "use the service's default claims")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *id == "" || (*list == "") == !*def {
		return errors.New("give -client and either -claims or -default")
	}
	var claims []string
	if !*def {
		var err error
		if claims, err = towerproto.ParseClaims(*list); err != nil {
			return err
		}
		if len(claims) == 0 {
			return errors.New("-claims lists no claim")
		}
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	if err := st.SetClientSDKClaims(ctx, *id, claims); err != nil {
		return fmt.Errorf("client %q: %w", *id, err)
	}
	out := map[string]any{"clientId": *id, "sdkClaims": claims}
	if claims == nil {
		out["sdkClaims"] = "default (" + fmt.Sprint(env.cfg.SDKDefaultClaims) + ")"
	}
	return json.NewEncoder(env.out).Encode(out)
}

// tower shows what towers reported through the mobile SDK:
//
//	lockernet-admin tower events-resets [-tower T] [-limit 50]
//
// One JSON line per report that a tower's event log was reset (events not yet uploaded are
// lost; a new boot epoch follows), newest first.
func towerCmd(ctx context.Context, env *adminEnv, args []string) error {
	if len(args) == 0 || args[0] != "events-resets" {
		return errors.New("usage: tower events-resets [-tower T] [-limit N]")
	}
	fs := flag.NewFlagSet("tower events-resets", flag.ContinueOnError)
	id := fs.String("tower", "", "only this tower (16 hex digits)")
	limit := fs.Int("limit", 50, "at most this many, newest first")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *limit < 1 || *limit > 10000 {
		return errors.New("-limit must be 1..10000")
	}
	if *id != "" {
		norm, err := towerproto.NormalizeTowerID(*id)
		if err != nil {
			return fmt.Errorf("-tower: %w", err)
		}
		*id = norm
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	resets, err := st.EventsResets(ctx, *id, *limit)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(env.out)
	for _, r := range resets {
		if err := enc.Encode(resetLine(r)); err != nil {
			return err
		}
	}
	return nil
}

func resetLine(r store.EventsReset) map[string]any {
	return map[string]any{"id": r.ID, "towerId": r.TowerID, "organizationId": r.OrganizationID, "clientId": r.ClientID,
		"userId": r.UserID, "reason": r.Reason, "repeats": r.Repeats, "at": r.CreatedAt, "lastAt": r.LastAt}
}
