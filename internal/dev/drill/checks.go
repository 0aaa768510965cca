package drill

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/lockernet/lockernet/internal/dev/drill/doors"
)

// target is one locker of one gateway that a drill opens.
type target struct {
	gw     *gatewayProc
	locker int
}

// lockerPool hands out each gateway locker once, alternating between the gateways, so
// every open of a drill has its locker to itself: a second actuation shows on that locker.
type lockerPool struct {
	mu   sync.Mutex
	sys  *system
	next []int // per gateway
	turn int
}

func newLockerPool(sys *system) *lockerPool {
	return &lockerPool{sys: sys, next: make([]int, len(sys.gws))}
}

// take returns a fresh locker, of gateway gw (an index) or, with gw < 0, of the gateways in turn.
func (p *lockerPool) take(gw int) (target, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.sys.gws {
		i := gw
		if i < 0 {
			i = p.turn % len(p.sys.gws)
			p.turn++
		}
		g := p.sys.gws[i]
		if p.next[i] < len(g.lockers) {
			p.next[i]++
			return target{gw: g, locker: g.lockers[p.next[i]-1]}, nil
		}
		if gw >= 0 {
			break
		}
	}
	return target{}, fmt.Errorf("no fresh gateway locker left (raise -lockers-per-gateway)")
}

// actuations reads every gateway's door actuations: serial → locker id → count.
func (s *system) actuations(ctx context.Context) (doors.Actuations, error) {
	out := doors.Actuations{}
	for _, g := range s.gws {
		st, err := sim{g}.stats(ctx)
		if err != nil {
			return nil, err
		}
		if out[g.serial], err = lockerCounts(g, st); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lockerCounts are a gateway's door actuations by locker id, from its simulator's stats.
func lockerCounts(g *gatewayProc, st simStats) (map[int]int, error) {
	m := map[int]int{}
	for k, v := range st.Opens {
		id, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("locker id %q in %s stats", k, g.serial)
		}
		m[id] = v
	}
	return m, nil
}

// openAnswer is the terminal answer of one open, for the door account.
type openAnswer struct {
	t        target
	answered bool
	state    string
	body     []byte
}

// accountDoors compares the actuations since baseline with the opens (package doors).
func accountDoors(acts, baseline doors.Actuations, opens []openAnswer) doors.Account {
	list := make([]doors.Open, len(opens))
	for i, o := range opens {
		list[i] = doors.Open{Gateway: o.t.gw.serial, Locker: o.t.locker,
			Opened: o.answered && o.state == "completed" && doors.Opened(o.body)}
	}
	return doors.Count(acts, baseline, list)
}

// reqRow is a gateway request as stored.
type reqRow struct {
	status    string
	attempts  int
	created   time.Time
	completed *time.Time
}

// requestRows reads the stored gateway requests of ids.
func (s *system) requestRows(ctx context.Context, ids []string) (map[string]reqRow, error) {
	rows, err := s.st.Pool().Query(ctx, `
		SELECT id::text, status, attempts, created_at, completed_at FROM gateway_requests WHERE id::text = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read gateway requests: %w", err)
	}
	defer rows.Close()
	out := map[string]reqRow{}
	for rows.Next() {
		var id string
		var r reqRow
		if err := rows.Scan(&id, &r.status, &r.attempts, &r.created, &r.completed); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, rows.Err()
}

// parallel runs fn(0..n-1) with at most width at once.
func parallel(n, width int, fn func(i int)) {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}(i)
	}
	wg.Wait()
}

// latest returns the latest of ts (zero when empty).
func latest(ts []time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// doorWording is how a drill's report words its door account.
type doorWording struct {
	figure      string // the figure's name
	unconfirmed string // what a door moved for that no open answered completed asked for
	duplicates  string // the check of no door opened twice
}

var (
	// doorsNotCompleted is the wording of the drills whose opens are answered or lost.
	doorsNotCompleted = doorWording{"Door actuations", "an open not answered completed",
		"no door opened more than once per open request (/sim/stats)"}
	// doorsOtherThanCompleted is the wording of the drills whose opens may end other than
	// completed (a send cut by a kill ends gateway_unresponsive).
	doorsOtherThanCompleted = doorWording{"Door actuations", "an open answered other than completed",
		"no door opened more than once per open request (/sim/stats)"}
)

// checkDoors reads every gateway's door actuations, accounts for them against the opens
// since baseline and reports the account and its two checks: no door opened twice, and
// every open answered completed with doorOpen true moved its door. The caller waits first
// until nothing sent can still be on its way. It fails only when a gateway's counters cannot
// be read.
func checkDoors(ctx context.Context, r *result, sys *system, baseline doors.Actuations, opens []openAnswer, w doorWording) error {
	acts, err := sys.actuations(ctx)
	if err != nil {
		return err
	}
	d := accountDoors(acts, baseline, opens)
	r.duplicates = d.Duplicates
	r.figure(w.figure, "%d of %d opens moved their door once; %d extra actuations; %d doors moved for "+w.unconfirmed,
		d.Actuated, d.Sent, d.Duplicates, d.MovedUnconfirmed)
	r.verify(d.Duplicates == 0, w.duplicates, "%d extra actuations", d.Duplicates)
	r.verify(d.FalseOpen == 0, "every open answered completed with doorOpen true actuated its door", "%d did not", d.FalseOpen)
	return nil
}

// storedSince counts the gateway requests stored since t.
func (s *system) storedSince(ctx context.Context, t time.Time) (int, error) {
	var n int
	err := s.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gateway_requests WHERE created_at >= $1`, t).Scan(&n)
	return n, err
}

// waitStored waits up to limit until n gateway requests are stored since t, and returns how
// many are.
func (s *system) waitStored(ctx context.Context, t time.Time, n int, limit time.Duration) int {
	var stored int
	waitFor(ctx, limit, 100*time.Millisecond, func() bool {
		var err error
		stored, err = s.storedSince(ctx, t)
		return err == nil && stored >= n
	})
	return stored
}

// waitSent waits up to a minute until every request of ids has been sent to its gateway or
// settled, and returns how many were sent and unanswered, how many settled, and whether
// that was all of them.
func (s *system) waitSent(ctx context.Context, ids []string) (sent, settled int, all bool) {
	_, all = waitFor(ctx, time.Minute, 200*time.Millisecond, func() bool {
		var err error
		sent, settled, err = s.sentCounts(ctx, ids)
		return err == nil && sent+settled >= len(ids)
	})
	return sent, settled, all
}

// sentCounts counts the requests of ids sent to their gateway and unanswered, and those
// settled.
func (s *system) sentCounts(ctx context.Context, ids []string) (sent, settled int, err error) {
	err = s.st.Pool().QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE last_send > 0 AND completed_at IS NULL), count(*) FILTER (WHERE completed_at IS NOT NULL)
		FROM gateway_requests WHERE id::text = ANY($1)`, ids).Scan(&sent, &settled)
	return sent, settled, err
}

// sentIDs returns which requests of ids have been sent to their gateway or have settled.
func (s *system) sentIDs(ctx context.Context, ids []string) (map[string]bool, error) {
	rows, err := s.st.Pool().Query(ctx, `
		SELECT id::text FROM gateway_requests WHERE id::text = ANY($1) AND (last_send > 0 OR completed_at IS NOT NULL)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read sent gateway requests: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// waitOutboxDrained waits until every workflow start and signal written to the outbox has
// been dispatched to Temporal, and checks that it was (what: the check's wording).
func waitOutboxDrained(ctx context.Context, r *result, sys *system, limit time.Duration, what string) {
	var left int
	_, ok := waitFor(ctx, limit, 250*time.Millisecond, func() bool {
		return sys.st.Pool().QueryRow(ctx, `SELECT count(*) FROM workflow_outbox`).Scan(&left) == nil && left == 0
	})
	r.verify(ok, what, "%d rows left", left)
}

// outboxDrains is the cluster drills' wording of waitOutboxDrained's check.
const outboxDrains = "the workflow outbox drains (every workflow start and signal reached Temporal)"

// waitKeysHonoured waits until the gateway sync has recorded that every gateway of the
// system honours Idempotency-Key (their answers say so), and checks that it did: only then
// may a send whose fate a kill made unknown go out again.
func waitKeysHonoured(ctx context.Context, r *result, sys *system) {
	var left int
	_, ok := waitFor(ctx, time.Minute, 250*time.Millisecond, func() bool {
		return sys.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gateways WHERE NOT honours_idempotency_keys AND disabled_at IS NULL`).
			Scan(&left) == nil && left == 0
	})
	r.verify(ok, "the gateways honour Idempotency-Key (recorded by the gateway sync before the load)", "%d not recorded", left)
}

// checkOpensExactlyOnce checks DESIGN §6.2's promise for gateways that honour
// Idempotency-Key: a kill of a cloud process mid-open loses no open — every open ended
// completed and moved its door exactly once (the door account of checkDoors, read again).
// Every kill drill with opens in flight checks it, on both shapes.
func checkOpensExactlyOnce(ctx context.Context, r *result, sys *system, baseline doors.Actuations, opens []openAnswer) error {
	completed := 0
	for _, o := range opens {
		if o.answered && o.state == "completed" {
			completed++
		}
	}
	r.verify(completed == len(opens), "every open ended completed (a send cut by the kill was sent again with its key)",
		"%d of %d", completed, len(opens))
	acts, err := sys.actuations(ctx)
	if err != nil {
		return err
	}
	d := accountDoors(acts, baseline, opens)
	r.verify(d.Actuated == len(opens) && d.Duplicates == 0, "every open moved its door exactly once (/sim/stats)",
		"%d of %d moved once, %d extra actuations", d.Actuated, len(opens), d.Duplicates)
	return nil
}
