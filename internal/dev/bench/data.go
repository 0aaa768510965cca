package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// The bench works in an organization of its own, so the demo data stays as it was.
const (
	benchOrgName  = "Bench Load"
	benchClientID = "bench-sp"
	flowLockers   = 100 // per flow tower
)

// flowLocationsFor is how many flow towers the options need: every flow of the highest
// flow step on a fresh locker, and the expiry's reservations; 100 (10,000 lockers) at least.
func flowLocationsFor(o options) int {
	need := max(o.expiryN, o.windowsN)
	if len(o.flowRates) > 0 {
		need = max(need, int(math.Ceil(o.flowRates[len(o.flowRates)-1]*o.step.Seconds())))
	}
	return max(100, (need+flowLockers-1)/flowLockers)
}

// dataset is what the scenarios drive.
type dataset struct {
	orgID        int64
	clientSecret string
	flowLockers  []lockerRef // fresh lockers for the flow and expiry scenarios
	searchBox    box         // where the generated search locations are
}

type lockerRef struct {
	TowerID string
	ID      int64
}

type box struct{ minLat, maxLat, minLon, maxLon float64 }

// continental US: the generated search locations spread over it.
var usBox = box{minLat: 25, maxLat: 49, minLon: -124, maxLon: -67}

// prepare makes (once) the bench organization with its client, flowLocations locations of
// one tower and 100 lockers each for the flows, and searchLocations locations of one tower
// and two lockers each for the search scenario, and frees every bench locker.
func prepare(ctx context.Context, st *store.Store, ring *keyring.Keyring, searchLocations, flowLocations int) (dataset, error) {
	org, err := st.EnsureOrganization(ctx, benchOrgName)
	if err != nil {
		return dataset{}, err
	}
	ds := dataset{orgID: org.ID, clientSecret: credential.NewSecret(), searchBox: usBox}
	if _, err := st.ClientByID(ctx, benchClientID); errors.Is(err, store.ErrNotFound) {
		err = st.CreateClient(ctx, store.Client{ClientID: benchClientID, OrganizationID: org.ID, Name: "Load generator",
			SecretHash: credential.Hash(ds.clientSecret), Scopes: []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess}})
		if err != nil {
			return dataset{}, err
		}
	} else if err != nil {
		return dataset{}, err
	} else if err := st.SetClientSecret(ctx, benchClientID, credential.Hash(ds.clientSecret)); err != nil {
		return dataset{}, err
	}
	// The load generator measures the system, not the per-client rate limits: its own client
	// gets an override, the way an operator exempts a trusted client.
	unlimited := 1000000
	if err := st.SetClientRateLimits(ctx, benchClientID, &unlimited, &unlimited); err != nil {
		return dataset{}, err
	}
	typeID, err := st.UpsertLockerType(ctx, org.ID, store.LockerType{Name: "small", SortOrder: 1})
	if err != nil {
		return dataset{}, err
	}
	pool := st.Pool()
	rng := mrand.New(mrand.NewPCG(42, 7))
	if err := ensureLocations(ctx, pool, ring, org.ID, typeID, "Bench Flow", "0b", flowLocations, flowLockers,
		box{minLat: 33.8, maxLat: 34.3, minLon: -118.6, maxLon: -117.9}, rng); err != nil {
		return dataset{}, err
	}
	if err := ensureLocations(ctx, pool, ring, org.ID, typeID, "Bench Search", "0c", searchLocations, 2, usBox, rng); err != nil {
		return dataset{}, err
	}
	if err := resetBench(ctx, pool, org.ID); err != nil {
		return dataset{}, err
	}
	rows, err := pool.Query(ctx, `
		SELECT k.tower_id, k.id FROM lockers k JOIN towers t ON t.id = k.tower_id
		WHERE k.organization_id = $1 AND t.id LIKE '0b%' ORDER BY k.id`, org.ID)
	if err != nil {
		return dataset{}, fmt.Errorf("list flow lockers: %w", err)
	}
	ds.flowLockers, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (lockerRef, error) {
		var l lockerRef
		return l, r.Scan(&l.TowerID, &l.ID)
	})
	if err != nil {
		return dataset{}, fmt.Errorf("list flow lockers: %w", err)
	}
	return ds, nil
}

// ensureLocations creates n locations named "<prefix> NNNNNN" with one tower (id
// "<towerPrefix>" + 14 hex) and perTower lockers each, with COPY, unless they exist.
func ensureLocations(ctx context.Context, pool *pgxpool.Pool, ring *keyring.Keyring, orgID, typeID int64, prefix, towerPrefix string,
	n, perTower int, b box, rng *mrand.Rand) error {
	var have int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM locations WHERE organization_id = $1 AND name LIKE $2`, orgID, prefix+" %").Scan(&have); err != nil {
		return fmt.Errorf("count bench locations: %w", err)
	}
	if have >= n {
		return nil
	}
	start := time.Now()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// Each run's set is made in one transaction, so the ones there are 0 … have-1: only the
	// rest is added (an earlier run's flows left reservations, tokens and tower commands on the
	// lockers and towers there; they stay).
	var firstID int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(id), 0) + 1 FROM locations`).Scan(&firstID); err != nil {
		return err
	}
	locRows := make([][]any, 0, n-have)
	towerRows := make([][]any, 0, n-have)
	lockerRows := make([][]any, 0, (n-have)*perTower)
	secret := make([]byte, 32)
	for i := have; i < n; i++ {
		id := firstID + int64(i-have)
		lat := b.minLat + rng.Float64()*(b.maxLat-b.minLat)
		lon := b.minLon + rng.Float64()*(b.maxLon-b.minLon)
		locRows = append(locRows, []any{id, orgID, fmt.Sprintf("%s %06d", prefix, i), math.Round(lat*1e6) / 1e6, math.Round(lon*1e6) / 1e6,
			fmt.Sprintf("%d Bench St", i+1), "Benchville", "CA", "90000", "US"})
		towerID := fmt.Sprintf("%s%014x", towerPrefix, i)
		_, _ = rand.Read(secret)
		towerRows = append(towerRows, []any{towerID, orgID, id, fmt.Sprintf("%s tower %d", prefix, i), ring.Seal(keyring.TowerSecretPurpose(towerID), secret)})
		for k := range perTower {
			lockerRows = append(lockerRows, []any{towerID, id, orgID, fmt.Sprint(k + 1), typeID, k%4 == 3})
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"locations"},
		[]string{"id", "organization_id", "name", "lat", "lon", "address1", "city", "state", "zip", "country"}, pgx.CopyFromRows(locRows)); err != nil {
		return fmt.Errorf("copy bench locations: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"towers"},
		[]string{"id", "organization_id", "location_id", "name", "secret_sealed"}, pgx.CopyFromRows(towerRows)); err != nil {
		return fmt.Errorf("copy bench towers: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"lockers"},
		[]string{"tower_id", "location_id", "organization_id", "name", "locker_type_id", "is_low_locker"}, pgx.CopyFromRows(lockerRows)); err != nil {
		return fmt.Errorf("copy bench lockers: %w", err)
	}
	// Keep the identity sequence ahead of the ids copied in.
	if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('locations', 'id'), (SELECT max(id) FROM locations))`); err != nil {
		return fmt.Errorf("move location id sequence: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `ANALYZE locations; ANALYZE towers; ANALYZE lockers`); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	logf("created %d %q locations (%d lockers) in %s", n-have, prefix, len(lockerRows), time.Since(start).Round(time.Millisecond))
	return nil
}

// resetBench frees every bench locker and ends the bench's reservations and tokens, so each
// scenario starts from available lockers. Their workflows find nothing left to do.
func resetBench(ctx context.Context, pool *pgxpool.Pool, orgID int64) error {
	for _, q := range []string{
		`DELETE FROM workflow_outbox WHERE workflow_id LIKE 'pickup-window/%' AND search_attributes->>'OrganizationId' = $1::bigint::text`,
		`DELETE FROM pickup_windows WHERE organization_id = $1`,
		`UPDATE reservations SET status = 'cancelled', ended_at = now() WHERE organization_id = $1 AND status = 'active'`,
		`UPDATE locker_tokens SET status = 'revoked' WHERE organization_id = $1 AND status = 'active'`,
		`UPDATE lockers SET status = 1, hold_expires_at = NULL, reservation_id = NULL, possessor_client_id = NULL,
		        possession_since = NULL, kept_possession = false, updated_at = now()
		 WHERE organization_id = $1 AND status <> 1`,
	} {
		if _, err := pool.Exec(ctx, q, orgID); err != nil {
			return fmt.Errorf("reset bench: %w", err)
		}
	}
	return nil
}
