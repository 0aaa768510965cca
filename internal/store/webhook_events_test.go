package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
)

// eventLog reads the events the tower API's changes record, as a receiver would get them.
type eventLog struct {
	t     *testing.T
	st    *store.Store
	orgID int64
}

// of returns the events of type typ whose data match, oldest first.
func (l eventLog) of(typ string, match func(data map[string]any) bool) []store.WebhookEvent {
	l.t.Helper()
	evs, err := l.st.WebhookEvents(context.Background(), store.EventFilter{Scope: store.WebhookScope{OrgID: l.orgID}, Type: typ, Limit: 1000})
	require.NoError(l.t, err)
	var out []store.WebhookEvent
	for i := len(evs) - 1; i >= 0; i-- {
		if match(eventData(l.t, evs[i])) {
			out = append(out, evs[i])
		}
	}
	return out
}

// one requires exactly one event of type typ whose data match, of the organization and
// sub-organization given, and returns its data.
func (l eventLog) one(typ string, subOrg *int64, match func(data map[string]any) bool) map[string]any {
	l.t.Helper()
	evs := l.of(typ, match)
	require.Len(l.t, evs, 1, "%s events", typ)
	ev := evs[0]
	assert.Equal(l.t, l.orgID, ev.OrgID)
	assert.Equal(l.t, subOrg, ev.SubOrgID, "%s: sub-organization", typ)
	return eventData(l.t, ev)
}

func (l eventLog) count() int {
	l.t.Helper()
	return countRows(l.t, l.st, `SELECT count(*) FROM webhook_events WHERE organization_id = $1`, l.orgID)
}

func eventData(t *testing.T, ev store.WebhookEvent) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(ev.Data, &m))
	return m
}

// apiTime is a time as the tower API writes it.
func apiTime(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func idIs(id any) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["id"] == id }
}

func lockerIs(id int64) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["id"] == float64(id) }
}

func usedLockerIs(id int64) func(map[string]any) bool {
	return func(m map[string]any) bool {
		k, _ := m["locker"].(map[string]any)
		return k != nil && k["id"] == float64(id)
	}
}

// requireLockerData checks a locker as the tower API shows it.
func requireLockerData(t *testing.T, st *store.Store, orgID int64, towerID string, id int64, data map[string]any, status store.LockerStatus) {
	t.Helper()
	k, err := st.Locker(context.Background(), orgID, towerID, id)
	require.NoError(t, err)
	assert.Equal(t, float64(k.ID), data["id"])
	assert.Equal(t, k.Name, data["name"])
	assert.Equal(t, k.IsLowLocker, data["isLowLocker"])
	assert.Equal(t, k.TowerID, data["towerId"])
	assert.Equal(t, float64(k.LocationID), data["locationId"])
	assert.Equal(t, map[string]any{"id": float64(status), "name": status.Name()}, data["status"])
	typ := data["type"].(map[string]any)
	assert.Equal(t, float64(k.TypeID), typ["id"])
	assert.Equal(t, k.TypeName, typ["name"])
	assert.Equal(t, *k.TypeDescription, typ["description"])
	assert.Equal(t, k.AccessMode, data["accessMode"])
	assert.Len(t, data, 8, "the locker's fields, as the API shows them")
}

func requireReservationData(t *testing.T, r store.Reservation, status string, data map[string]any) {
	t.Helper()
	assert.Equal(t, map[string]any{"id": r.ID.String(), "lockerId": float64(r.LockerID), "towerId": r.TowerID, "status": status,
		"createdAt": apiTime(r.CreatedAt), "expiresAt": apiTime(r.ExpiresAt), "duration": float64(r.DurationSeconds)}, data)
}

// Every state change of the tower API records its event, once, in its transaction, with
// the object as the API shows it; a change that fails or rolls back records none; with an
// enabled endpoint each event has one delivery and one WebhookDelivery outbox row.
func TestTowerChangesRecordWebhookEvents(t *testing.T) {
	t.Parallel()
	st, demo := seeded(t)
	ctx := context.Background()
	orgID := demo.Credentials.OrganizationID
	subOrg := demo.Credentials.SubOrganizationID
	union, pier := demo.Towers[0], demo.Towers[2] // Union Station is in the sub-organization, the pier is not
	_, err := st.CreateWebhookEndpoint(ctx, store.WebhookEndpoint{ID: uuid.New(), OrgID: orgID, URL: "http://127.0.0.1:9/hook",
		Enabled: true, SecretSealed: []byte("sealed")})
	require.NoError(t, err)
	log := eventLog{t: t, st: st, orgID: orgID}
	reserve := func(towerID string, lockerID int64, d time.Duration) (store.Reservation, error) {
		return st.ReserveLocker(ctx, store.ReserveParams{ID: uuid.New(), OrgID: orgID, ClientID: seed.ClientID,
			TowerID: towerID, LockerID: lockerID, Duration: d})
	}
	issue := func(towerID string, lockerID int64, typ string, info *string) store.LockerToken {
		var res store.IssueResult
		require.NoError(t, st.WithTx(ctx, func(tx *store.Store) error {
			var err error
			res, err = tx.IssueToken(ctx, store.IssueTokenParams{ID: uuid.New(), OrgID: orgID, ClientID: seed.ClientID,
				TowerID: towerID, LockerID: lockerID, Type: typ, Duration: time.Hour, ClientInfo: info})
			return err
		}))
		return res.Token
	}

	t.Run("reservation.created and .cancelled", func(t *testing.T) {
		k := union.LockerIDs[0]
		r, err := reserve(union.ID, k, time.Hour)
		require.NoError(t, err)
		requireReservationData(t, r, "active", log.one(store.EventTypeReservationCreated, &subOrg, idIs(r.ID.String())))

		before := log.count()
		_, err = reserve(union.ID, k, time.Hour)
		require.ErrorIs(t, err, store.ErrConflict)
		assert.Equal(t, before, log.count(), "a reservation that failed records no event")

		_, cancelled, err := st.CancelReservation(ctx, orgID, seed.ClientID, union.ID, k, r.ID)
		require.NoError(t, err)
		require.True(t, cancelled)
		requireReservationData(t, r, "cancelled", log.one(store.EventTypeReservationCancelled, &subOrg, idIs(r.ID.String())))
		_, cancelled, err = st.CancelReservation(ctx, orgID, seed.ClientID, union.ID, k, r.ID)
		require.NoError(t, err)
		require.False(t, cancelled)
		assert.Len(t, log.of(store.EventTypeReservationCancelled, idIs(r.ID.String())), 1, "a repeated cancel records nothing")
	})

	t.Run("reservation.expired", func(t *testing.T) {
		r, err := reserve(pier.ID, pier.LockerIDs[0], time.Hour)
		require.NoError(t, err)
		_, err = st.ExpireReservation(ctx, r.ID)
		require.ErrorIs(t, err, store.ErrNotDue)
		assert.Empty(t, log.of(store.EventTypeReservationExpired, idIs(r.ID.String())), "not due: nothing expired")

		backdate(t, st, r.ID)
		expired, err := st.ExpireReservation(ctx, r.ID)
		require.NoError(t, err)
		require.True(t, expired)
		r, err = st.Reservation(ctx, orgID, r.ID)
		require.NoError(t, err)
		requireReservationData(t, r, "expired", log.one(store.EventTypeReservationExpired, nil, idIs(r.ID.String())))
		expired, err = st.ExpireReservation(ctx, r.ID)
		require.NoError(t, err)
		require.False(t, expired)
		assert.Len(t, log.of(store.EventTypeReservationExpired, idIs(r.ID.String())), 1)
	})

	t.Run("locker.released", func(t *testing.T) {
		k := union.LockerIDs[1]
		issue(union.ID, k, store.TokenDropoff, nil)
		// A release whose transaction rolls back records nothing.
		errRollback := errors.New("roll back")
		err := st.WithTx(ctx, func(tx *store.Store) error {
			require.NoError(t, tx.ReleaseLocker(ctx, orgID, seed.ClientID, union.ID, k))
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		assert.Empty(t, log.of(store.EventTypeLockerReleased, lockerIs(k)))

		require.NoError(t, st.ReleaseLocker(ctx, orgID, seed.ClientID, union.ID, k))
		requireLockerData(t, st, orgID, union.ID, k, log.one(store.EventTypeLockerReleased, &subOrg, lockerIs(k)), store.StatusDeclined)
		require.ErrorIs(t, st.ReleaseLocker(ctx, orgID, seed.ClientID, union.ID, k), store.ErrConflict)
		assert.Len(t, log.of(store.EventTypeLockerReleased, lockerIs(k)), 1, "a release that failed records no event")
	})

	t.Run("locker_token.expired", func(t *testing.T) {
		info := "order 9"
		tok := issue(pier.ID, pier.LockerIDs[1], store.TokenDropoff, &info)
		_, err := st.ExpireToken(ctx, tok.ID)
		require.ErrorIs(t, err, store.ErrNotDue)
		_, err = st.Pool().Exec(ctx, `
			WITH t AS (UPDATE locker_tokens SET expires_at = now() - interval '1 second' WHERE id = $1 RETURNING locker_id)
			UPDATE lockers SET hold_expires_at = now() - interval '1 second' WHERE id = (SELECT locker_id FROM t)`, tok.ID)
		require.NoError(t, err)
		tok, err = st.Token(ctx, orgID, tok.ID)
		require.NoError(t, err)
		expired, err := st.ExpireToken(ctx, tok.ID)
		require.NoError(t, err)
		require.True(t, expired)
		assert.Equal(t, map[string]any{"id": tok.ID.String(), "type": "dropoff", "lockerId": float64(tok.LockerID), "towerId": tok.TowerID,
			"clientInfo": "order 9", "createdAt": apiTime(tok.CreatedAt), "expiresAt": apiTime(tok.ExpiresAt)},
			log.one(store.EventTypeLockerTokenExpired, nil, idIs(tok.ID.String())))
		expired, err = st.ExpireToken(ctx, tok.ID)
		require.NoError(t, err)
		require.False(t, expired)
		assert.Len(t, log.of(store.EventTypeLockerTokenExpired, idIs(tok.ID.String())), 1)
		assert.Equal(t, 1, lockerStatus(t, st, tok.LockerID), "the rental ended with its last drop-off token")
	})

	t.Run("locker.dropoff_completed and .pickup_completed", func(t *testing.T) {
		k := union.LockerIDs[2]
		info := "order 42"
		drop := issue(union.ID, k, store.TokenDropoff, &info)
		events := useEvents(drop, 7, 1, true)
		apply(t, st, union.ID, events...)
		data := log.one(store.EventTypeLockerDropoffCompleted, &subOrg, usedLockerIs(k))
		requireLockerData(t, st, orgID, union.ID, k, data["locker"].(map[string]any), store.StatusOccupied)
		assert.Equal(t, drop.ID.String(), data["tokenId"])
		assert.Equal(t, "order 42", data["clientInfo"])
		assert.Equal(t, apiTime(events[0].At), data["completedAt"])
		apply(t, st, union.ID, events...) // a replay changes nothing
		assert.Len(t, log.of(store.EventTypeLockerDropoffCompleted, usedLockerIs(k)), 1, "a replay records nothing")

		// A pickup that leaves the item inside completes nothing; one that empties it does.
		pick := issue(union.ID, k, store.TokenPickup, nil)
		apply(t, st, union.ID, useEvents(pick, 7, 4, true)...)
		assert.Empty(t, log.of(store.EventTypeLockerPickupCompleted, usedLockerIs(k)))
		pick = issue(union.ID, k, store.TokenPickup, &info)
		apply(t, st, union.ID, useEvents(pick, 7, 7, false)...)
		data = log.one(store.EventTypeLockerPickupCompleted, &subOrg, usedLockerIs(k))
		requireLockerData(t, st, orgID, union.ID, k, data["locker"].(map[string]any), store.StatusAvailable)
		assert.Equal(t, pick.ID.String(), data["tokenId"])
		assert.Equal(t, "order 42", data["clientInfo"])

		// A drop-off whose door closed empty completes nothing.
		k2 := union.LockerIDs[3]
		empty := issue(union.ID, k2, store.TokenDropoff, nil)
		apply(t, st, union.ID, useEvents(empty, 8, 1, false)...)
		assert.Empty(t, log.of(store.EventTypeLockerDropoffCompleted, usedLockerIs(k2)))
	})

	t.Run("locker.out_of_service and .in_service", func(t *testing.T) {
		k := pier.LockerIDs[2]
		r, err := reserve(pier.ID, k, time.Hour)
		require.NoError(t, err)
		ch, err := st.SetOutOfService(ctx, pier.ID, k, "door jammed", false)
		require.NoError(t, err)
		require.NotNil(t, ch.CancelledReservation)
		requireLockerData(t, st, orgID, pier.ID, k, log.one(store.EventTypeLockerOutOfService, nil, lockerIs(k)), store.StatusOutOfService)
		requireReservationData(t, r, "cancelled", log.one(store.EventTypeReservationCancelled, nil, idIs(r.ID.String())))
		_, err = st.SetOutOfService(ctx, pier.ID, k, "door jammed", false)
		require.NoError(t, err)
		assert.Len(t, log.of(store.EventTypeLockerOutOfService, lockerIs(k)), 1, "out of service twice changes nothing")

		ch, err = st.SetInService(ctx, pier.ID, k)
		require.NoError(t, err)
		require.Equal(t, store.StatusAvailable, ch.To)
		requireLockerData(t, st, orgID, pier.ID, k, log.one(store.EventTypeLockerInService, nil, lockerIs(k)), store.StatusAvailable)
		_, err = st.SetInService(ctx, pier.ID, k)
		require.NoError(t, err)
		assert.Len(t, log.of(store.EventTypeLockerInService, lockerIs(k)), 1, "in service twice changes nothing")

		// An occupied locker without force: refused, no event.
		occ := union.LockerIDs[4]
		drop := issue(union.ID, occ, store.TokenDropoff, nil)
		apply(t, st, union.ID, useEvents(drop, 9, 1, true)...)
		_, err = st.SetOutOfService(ctx, union.ID, occ, "door jammed", false)
		require.ErrorIs(t, err, store.ErrConflict)
		assert.Empty(t, log.of(store.EventTypeLockerOutOfService, lockerIs(occ)))
	})

	t.Run("the sweeper's expiries", func(t *testing.T) {
		// Holds whose workflows never ran: the sweeper expires them and records their events,
		// and the workflows' late expiries record nothing more.
		r, err := reserve(union.ID, union.LockerIDs[5], time.Hour)
		require.NoError(t, err)
		info := "order 11"
		tok := issue(pier.ID, pier.LockerIDs[3], store.TokenDropoff, &info)
		_, err = st.Pool().Exec(ctx, `
			WITH r AS (UPDATE reservations SET expires_at = now() - interval '1 hour' WHERE id = $1),
			t AS (UPDATE locker_tokens SET expires_at = now() - interval '1 hour' WHERE id = $2)
			UPDATE lockers SET hold_expires_at = now() - interval '1 hour' WHERE id IN ($3, $4)`,
			r.ID, tok.ID, union.LockerIDs[5], pier.LockerIDs[3])
		require.NoError(t, err)
		r, err = st.Reservation(ctx, orgID, r.ID)
		require.NoError(t, err)
		tok, err = st.Token(ctx, orgID, tok.ID)
		require.NoError(t, err)
		reservations, lockers, err := st.ReleaseLapsedHolds(ctx, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 1, reservations)
		assert.Equal(t, 2, lockers)
		requireReservationData(t, r, "expired", log.one(store.EventTypeReservationExpired, &subOrg, idIs(r.ID.String())))
		assert.Equal(t, map[string]any{"id": tok.ID.String(), "type": "dropoff", "lockerId": float64(tok.LockerID), "towerId": tok.TowerID,
			"clientInfo": "order 11", "createdAt": apiTime(tok.CreatedAt), "expiresAt": apiTime(tok.ExpiresAt)},
			log.one(store.EventTypeLockerTokenExpired, nil, idIs(tok.ID.String())))

		expired, err := st.ExpireReservation(ctx, r.ID)
		require.NoError(t, err)
		assert.False(t, expired)
		expired, err = st.ExpireToken(ctx, tok.ID)
		require.NoError(t, err)
		assert.False(t, expired)
		assert.Len(t, log.of(store.EventTypeReservationExpired, idIs(r.ID.String())), 1)
		assert.Len(t, log.of(store.EventTypeLockerTokenExpired, idIs(tok.ID.String())), 1)
	})

	// One enabled endpoint: every event has one delivery and one WebhookDelivery outbox row.
	require.NotZero(t, log.count())
	rows, err := st.Pool().Query(ctx, `
		SELECT ev.type, (SELECT count(*) FROM webhook_deliveries d WHERE d.event_id = ev.id),
		       (SELECT count(*) FROM webhook_deliveries d JOIN workflow_outbox o ON o.input->>'delivery_id' = d.id::text
		        WHERE d.event_id = ev.id AND o.workflow_type = 'WebhookDelivery'
		          AND o.workflow_id = 'webhook-delivery/' || d.id::text AND o.search_attributes->>'EventType' = ev.type)
		FROM webhook_events ev WHERE ev.organization_id = $1`, orgID)
	require.NoError(t, err)
	seen := map[string]bool{}
	for rows.Next() {
		var typ string
		var deliveries, outbox int
		require.NoError(t, rows.Scan(&typ, &deliveries, &outbox))
		assert.Equal(t, 1, deliveries, "%s: deliveries", typ)
		assert.Equal(t, 1, outbox, "%s: outbox rows", typ)
		seen[typ] = true
	}
	require.NoError(t, rows.Err())
	for _, typ := range []string{store.EventTypeReservationCreated, store.EventTypeReservationCancelled, store.EventTypeReservationExpired,
		store.EventTypeLockerDropoffCompleted, store.EventTypeLockerPickupCompleted, store.EventTypeLockerReleased,
		store.EventTypeLockerTokenExpired, store.EventTypeLockerOutOfService, store.EventTypeLockerInService} {
		assert.True(t, seen[typ], "%s recorded", typ)
	}
	assert.Equal(t, log.count(), countRows(t, st, `SELECT count(*) FROM workflow_outbox WHERE workflow_type = 'WebhookDelivery'`))
}
