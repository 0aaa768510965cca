package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"
)

// expiryResult is the expiry-fidelity scenario's outcome.
type expiryResult struct {
	Reservations int
	Failed       int
	ExpiresAt    time.Time
	// ReadAvailable: of the lockers, how many read available within 1 s after expiry.
	ReadAvailable   int
	Freed           summary
	WriteBackWithin int // written back (workflow) within 1 s of expiry
	WriteBack       summary
	AllWrittenAfter time.Duration
}

// runExpiry reserves n lockers so that all reservations expire at the same second, then
// measures when each locker is free: as the API reads it, and when its workflow wrote it back.
func runExpiry(ctx context.Context, b *bench, n int) (expiryResult, error) {
	if err := resetBench(ctx, b.pool, b.data.orgID); err != nil {
		return expiryResult{}, err
	}
	if n > len(b.data.flowLockers) {
		n = len(b.data.flowLockers)
	}
	lockers := b.data.flowLockers[:n]
	// Creating them takes a while; aim the common expiry well after the last one is made.
	expiry := time.Now().Add(time.Duration(float64(n)/150+30) * time.Second).Truncate(time.Second)
	res := expiryResult{Reservations: n, ExpiresAt: expiry}
	ids, expiresAt := reserveUntil(ctx, b, lockers, expiry, &res)
	logf("expiry: %d reservations made, %d failed; they expire at %s", n-res.Failed, res.Failed, expiry.Format(time.TimeOnly))

	seen := watchAvailable(ctx, b, lockers, expiry, expiresAt)
	freed := newSample("seen available after its expiry (API reads)")
	for id, exp := range expiresAt {
		at, ok := seen[id]
		if !ok {
			freed.fail()
			continue
		}
		lag := max(at.Sub(exp), 0)
		freed.add(lag)
		if lag <= time.Second {
			res.ReadAvailable++
		}
	}
	res.Freed = freed.summary()
	logf("expiry: %d of %d lockers seen available within 1 s of their own expiry", res.ReadAvailable, len(expiresAt))
	return res, measureWriteBack(ctx, b, ids, expiry, &res)
}

// reserveUntil reserves each of lockers until expiry, 32 at a time, and returns the
// reservations' ids and each locker's expiry as answered; res counts the failures.
func reserveUntil(ctx context.Context, b *bench, lockers []lockerRef, expiry time.Time, res *expiryResult) (ids []string, expiresAt map[int64]time.Time) {
	expiresAt = map[int64]time.Time{}
	var mu sync.Mutex
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, l := range lockers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			secs := int(math.Ceil(time.Until(expiry).Seconds()))
			r, err := b.api.authed(ctx, http.MethodPost, fmt.Sprintf("/api/v1/towers/%s/lockers/%d/reservations", l.TowerID, l.ID),
				map[string]any{"duration": secs})
			var created struct {
				ID        string    `json:"id"`
				LockerID  int64     `json:"lockerId"`
				ExpiresAt time.Time `json:"expiresAt"`
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil || r.status != http.StatusCreated || json.Unmarshal(r.body, &created) != nil {
				res.Failed++
				return
			}
			ids = append(ids, created.ID)
			expiresAt[created.LockerID] = created.ExpiresAt
		}()
	}
	wg.Wait()
	return ids, expiresAt
}

// watchAvailable reads every bench tower's lockers through the API, over and over from just
// before the expiry, and notes when each locker of expiresAt is first seen available.
func watchAvailable(ctx context.Context, b *bench, lockers []lockerRef, expiry time.Time, expiresAt map[int64]time.Time) map[int64]time.Time {
	towers := map[string]bool{}
	for _, l := range lockers {
		towers[l.TowerID] = true
	}
	seen := map[int64]time.Time{}
	time.Sleep(time.Until(expiry.Add(-time.Second)))
	pollEnd := expiry.Add(15 * time.Second)
	for time.Now().Before(pollEnd) && len(seen) < len(expiresAt) {
		var pmu sync.Mutex
		var pwg sync.WaitGroup
		psem := make(chan struct{}, 16)
		for t := range towers {
			pwg.Add(1)
			psem <- struct{}{}
			go func() {
				defer func() { <-psem; pwg.Done() }()
				r, err := b.api.authed(ctx, http.MethodGet, "/api/v1/towers/"+t+"/lockers", nil)
				at := time.Now()
				if err != nil || r.status != http.StatusOK {
					return
				}
				var ls []struct {
					ID     int64            `json:"id"`
					Status struct{ ID int } `json:"status"`
				}
				if json.Unmarshal(r.body, &ls) != nil {
					return
				}
				pmu.Lock()
				defer pmu.Unlock()
				for _, x := range ls {
					if _, ours := expiresAt[x.ID]; ours && x.Status.ID == 1 {
						if _, ok := seen[x.ID]; !ok {
							seen[x.ID] = at
						}
					}
				}
			}()
		}
		pwg.Wait()
	}
	return seen
}

// measureWriteBack waits for the workflows to write every expiry of ids back, then measures
// their lag into res.
func measureWriteBack(ctx context.Context, b *bench, ids []string, expiry time.Time, res *expiryResult) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		var left int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM reservations WHERE id = ANY($1::uuid[]) AND status = 'active'`, ids).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	res.AllWrittenAfter = time.Since(expiry)
	rows, err := b.pool.Query(ctx, `
		SELECT extract(epoch FROM k.updated_at - r.expires_at) FROM reservations r JOIN lockers k ON k.id = r.locker_id
		WHERE r.id = ANY($1::uuid[]) AND r.status = 'expired' AND k.reservation_id IS NULL`, ids)
	if err != nil {
		return err
	}
	lag := newSample("write-back lag after expiry")
	for rows.Next() {
		var secs float64
		if err := rows.Scan(&secs); err != nil {
			rows.Close()
			return err
		}
		d := time.Duration(secs * float64(time.Second))
		lag.add(d)
		if d <= time.Second {
			res.WriteBackWithin++
		}
	}
	rows.Close()
	res.WriteBack = lag.summary()
	return rows.Err()
}
