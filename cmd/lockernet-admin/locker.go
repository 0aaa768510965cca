package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/lockernet/lockernet/internal/outbox"
	"github.com/lockernet/lockernet/internal/store"
)

// locker changes a tower locker's service state:
//
//	lockernet-admin locker out-of-service -tower T -locker L -reason R [-force]
//	lockernet-admin locker in-service -tower T -locker L
//
// -locker takes the locker id or its door label. Tokens of an ended possession are revoked
// and their workflows told (through the outbox the apiservers dispatch).
func locker(ctx context.Context, env *adminEnv, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: locker out-of-service|in-service -tower T -locker L [-reason R] [-force]")
	}
	verb := args[0]
	fs := flag.NewFlagSet("locker "+verb, flag.ContinueOnError)
	tower := fs.String("tower", "", "tower id (16 hex digits)")
	lockerRef := fs.String("locker", "", "locker id, or its door label")
	reason := fs.String("reason", "", "why (out-of-service only)")
	force := fs.Bool("force", false, "take an occupied locker out of service; its item and possession are kept")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *tower == "" || *lockerRef == "" {
		return errors.New("-tower and -locker are required")
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(*lockerRef, 10, 64)
	if err != nil {
		if id, err = st.LockerIDByName(ctx, *tower, *lockerRef); err != nil {
			return fmt.Errorf("locker %q of tower %s: %w", *lockerRef, *tower, err)
		}
	}
	var ch store.ServiceChange
	// The workflows are told through the outbox; the apiservers' sweep dispatches them.
	_, err = outbox.Record(ctx, st, 0, nil, func(tx *store.Store) ([]store.OutboxItem, error) {
		switch verb {
		case "out-of-service":
			if *reason == "" {
				return nil, errors.New("-reason is required")
			}
			ch, err = tx.SetOutOfService(ctx, *tower, id, *reason, *force)
		case "in-service":
			ch, err = tx.SetInService(ctx, *tower, id)
		default:
			return nil, fmt.Errorf("unknown locker command %q", verb)
		}
		if err != nil {
			return nil, err
		}
		return outbox.EndServiceChange(ctx, tx, *tower, id, ch)
	})
	if err != nil {
		return err
	}
	return json.NewEncoder(env.out).Encode(map[string]any{"towerId": *tower, "lockerId": id, "from": ch.From.Name(), "to": ch.To.Name(),
		"revokedTokens": len(ch.RevokedTokens), "cancelledReservation": ch.CancelledReservation})
}
