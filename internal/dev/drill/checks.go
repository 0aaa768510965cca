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
		m := map[int]int{}
		for k, v := range st.Opens {
			id, err := strconv.Atoi(k)
			if err != nil {
				return nil, fmt.Errorf("locker id %q in %s stats", k, g.serial)
			}
			m[id] = v
		}
		out[g.serial] = m
	}
	return out, nil
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
