package drill

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockernet/lockernet/internal/dev/drill/doors"
	"github.com/lockernet/lockernet/internal/dev/loadclient"
)

// Every drill runs the same five phases:
//
//   - start: bring the system up (start for a make run system of the drill's own,
//     startCluster for the shared cluster shape) and read what the checks compare with;
//   - load: send the opens (submitOpens, startWaiting, openLoad) and tower flows (towerLoad)
//     the fault will hit;
//   - fault: kill, stop or break a component;
//   - recover: wait until the component is back and every request has settled;
//   - check: compare what the clients saw with Postgres, Temporal and the gateways' door
//     counters (checkOpens, checkReplays, settleHolds, …).
//
// A drill's own file holds its load and its fault; the steps below are the ones the drills
// share. A drill past its start reads as a list of named phases (runPhases), each a method of
// the drill's own struct, which carries what one phase leaves for the next.

// phase is one named step of a drill: the progress log prints its name as it begins.
type phase struct {
	name string
	run  func(context.Context) error
}

// errCheckFailed ends a drill at a phase whose fatal check has failed already: the report's
// checks say what went wrong, so the drill records no error of its own.
var errCheckFailed = errors.New("a fatal check failed")

// runPhases runs a drill's phases in order until one fails; that phase's error is the
// drill's (r.err) unless it is errCheckFailed.
func runPhases(ctx context.Context, r *result, phases ...phase) {
	for _, p := range phases {
		logf("  phase %s", p.name)
		if err := p.run(ctx); err != nil {
			if !errors.Is(err, errCheckFailed) {
				r.err = err
			}
			return
		}
	}
}

// sweeperReleased is the dev stack's log line of a sweep that released lapsed holds.
const sweeperReleased = "sweeper released lapsed holds"

// done is the end of a make run drill: finish's checks, then the system removed.
func (s *system) done(r *result) {
	finish(r, s)
	s.close()
}

// clusterRun is a cluster drill after its start phase: the shared system and what its checks
// compare with.
type clusterRun struct {
	r        *result
	sys      *system
	shape    *clusterShape
	restarts map[string]int   // the supervisor's restarts before the drill
	sweeps   int              // the sweeper's releases before the drill
	baseline doors.Actuations // the doors' actuations before the drill
	back     func()           // puts slowed gateways back (a no-op when none were slowed)
}

// startCluster is the start phase of a cluster drill: the shared system (started by the first
// cluster drill), the supervisor's restarts and the sweeper's releases so far and, with slow
// > 0, the gateways slowed (once the gateway sync has seen that they honour keys) so that
// opens are in flight at them; then the doors' actuations as the baseline. It returns nil
// when the drill cannot go on (r.err says why); otherwise the caller defers done.
func startCluster(ctx context.Context, r *result, shape *clusterShape, slow time.Duration) *clusterRun {
	r.settings = append(append(r.settings, baseSettings...), clusterSettings...)
	sys := shape.system(ctx, r)
	if sys == nil {
		return nil
	}
	cr := &clusterRun{r: r, sys: sys, shape: shape, back: func() {},
		restarts: sys.cluster.restarts(), sweeps: sys.cluster.stack.logCount(sweeperReleased)}
	var err error
	if slow > 0 {
		// Before the gateways are slowed: the gateway sync must see them answer.
		waitKeysHonoured(ctx, r, sys)
		cr.back, err = slowGateways(ctx, sys, slow)
	}
	if err == nil {
		cr.baseline, err = sys.actuations(ctx)
	}
	if err != nil {
		r.err = err
		cr.done()
		return nil
	}
	return cr
}

// done is the end of a cluster drill: the gateways put back, finish's checks, and the shared
// system released (a system left with a child down is not trusted to the next drill).
func (cr *clusterRun) done() {
	cr.back()
	finish(cr.r, cr.sys)
	cr.shape.release()
}

// killChild is the fault of a cluster kill drill and the first step of its recovery: SIGKILL
// to one child of the supervisor, then the check that the supervisor restarted it within
// 90 s. err is a kill that could not be sent; a restart that failed is a failed check.
func (cr *clusterRun) killChild(ctx context.Context, name string) (tKill, tBack time.Time, err error) {
	tKill = time.Now()
	pid, err := cr.sys.cluster.kill(name)
	if err != nil {
		return tKill, tBack, err
	}
	tBack, restartErr := cr.sys.cluster.waitRestarted(ctx, name, pid, 90*time.Second)
	cr.r.verify(restartErr == nil, "the supervisor restarts "+name+" and it answers /healthz", "%v", orOK(restartErr))
	if restartErr == nil {
		cr.r.figure(name+" healthy again", "%s after the kill", secs(tBack.Sub(tKill)))
	}
	return tKill, tBack, nil
}

// checkHolds is the check phase of a cluster drill with tower flows: the workflow outbox
// drained, every hold settled by its workflow (settleHolds), the supervisor's restarts (only
// killed, if any) and the sweeper idle.
func (cr *clusterRun) checkHolds(ctx context.Context, limit time.Duration, calls []towerCall, from, to time.Time, event, subject, killed string) error {
	waitOutboxDrained(ctx, cr.r, cr.sys, limit, outboxDrains)
	if err := settleHolds(ctx, cr.r, cr.sys, calls, from, to, event, subject); err != nil {
		return err
	}
	restartFigure(cr.r, cr.sys, cr.restarts, killed)
	sweeperFigure(cr.r, clusterSweeps(cr.sys, cr.sweeps))
	return nil
}

// checkOpens is the check phase of the opens of a kill drill, once nothing sent can still be
// on its way at a gateway: the doors' account (checkDoors, worded by w), then every open
// completed with its door moved exactly once (checkOpensExactlyOnce).
func checkOpens(ctx context.Context, r *result, sys *system, baseline doors.Actuations, opens []openAnswer, w doorWording) error {
	if err := checkDoors(ctx, r, sys, baseline, opens, w); err != nil {
		return err
	}
	return checkOpensExactlyOnce(ctx, r, sys, baseline, opens)
}

// towerLoad is the tower half of a drill's load: flows on tower lockers no drill has used on
// the system, each a reservation of hold and, for every other flow, a drop-off token on the
// same locker (towerFlow).
type towerLoad struct {
	tower   *towerAPI
	lockers []towerLocker
	hold    int // seconds
	cs      census
	flows   flowCalls
	next    atomic.Int64
}

// underLoad is what a make run drill under mixed load (tower flows and gateway opens) keeps
// from phase to phase: its system, the tower load, the cloud API client, the door actuations
// counted before the load, the pool of gateway lockers to open, and the load as it ran.
type underLoad struct {
	o   options
	r   *result
	sys *system

	tower    *towerLoad
	c        *cloud
	baseline doors.Actuations
	pool     *lockerPool
	load     mixedLoad
}

// startLoad is the start of the load: a tower load on n fresh lockers with holds of hold,
// the cloud API client, the door actuations counted before the load, and the locker pool.
func (u *underLoad) startLoad(ctx context.Context, n int, hold time.Duration) error {
	var err error
	if u.tower, err = newTowerLoad(ctx, u.sys, n, hold); err != nil {
		return err
	}
	if u.baseline, err = u.sys.actuations(ctx); err != nil {
		return err
	}
	u.c, u.pool = u.sys.cloud(), newLockerPool(u.sys)
	return nil
}

// checkLoadDoors is the doors' check of the load's opens (checkDoors), once nothing sent can
// still be on its way.
func (u *underLoad) checkLoadDoors(ctx context.Context) error {
	return checkDoors(ctx, u.r, u.sys, u.baseline, openAnswers(u.load.gl.outs, u.load.gl.targets), doorsNotCompleted)
}

// newTowerLoad makes n fresh tower lockers and the tower API client of the load.
func newTowerLoad(ctx context.Context, sys *system, n int, hold time.Duration) (*towerLoad, error) {
	lockers, err := sys.freshTowerLockers(ctx, n)
	if err != nil {
		return nil, err
	}
	tower, err := sys.tower(ctx)
	if err != nil {
		return nil, err
	}
	return &towerLoad{tower: tower, lockers: lockers, hold: int(hold / time.Second)}, nil
}

// flow runs flow i (on locker i): a reservation and, for every other flow, a drop-off token.
func (l *towerLoad) flow(ctx context.Context, i int) {
	l.flows.add(towerFlow(ctx, l.tower, l.lockers[i], l.hold, i%2 == 0, &l.cs), i%2 == 0)
}

// flowOnce runs flow i (on locker i) as the make run drills load the tower API: a
// reservation and, for every other flow, a drop-off token on it once the reservation is
// answered 201, each asked for once (postTower) and handed to record with the locker's path.
// It is false when the lockers have run out.
func (l *towerLoad) flowOnce(ctx context.Context, i int, record func(towerCall)) bool {
	if i >= len(l.lockers) {
		return false
	}
	path := l.lockers[i].path()
	res := postTower(ctx, l.tower, "reservation", path+"reservations", map[string]any{"duration": l.hold})
	res.locker = path
	record(res)
	if res.ok() && i%2 == 0 {
		tok := postTower(ctx, l.tower, "dropoff-token", path+"dropoff-locker-tokens", map[string]any{"duration": l.hold, "client_info": "drill"})
		tok.locker = path
		record(tok)
	}
	return true
}

// mixedLoad is the load of a make run drill whose fault hits tower flows and gateway opens
// alike: what its flows were answered and its opens' outcomes.
type mixedLoad struct {
	mu       sync.Mutex
	calls    []towerCall
	next     atomic.Int64 // flows started
	skipped  atomic.Int64 // flows not run for want of lockers
	gl       openLoad
	started  time.Time
	finished time.Time
}

// run runs flowRate tower flows (flowOnce) and openRate gateway opens a second for d, and
// fault beside them; it returns when all three have.
func (m *mixedLoad) run(ctx context.Context, load *towerLoad, c *cloud, pool *lockerPool, flowRate, openRate float64, d time.Duration, fault func()) {
	m.started = time.Now()
	var wg sync.WaitGroup
	wg.Go(fault)
	wg.Go(func() {
		loadclient.OpenLoop(ctx, flowRate, d, 0, func(ctx context.Context, _ int, _ time.Time) {
			if !load.flowOnce(ctx, int(m.next.Add(1))-1, m.record) {
				m.skipped.Add(1)
			}
		})
	})
	wg.Go(func() { m.gl.run(ctx, c, pool, openRate, d) })
	wg.Wait()
	m.finished = time.Now()
}

func (m *mixedLoad) record(c towerCall) {
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.mu.Unlock()
}

// openLoop starts rate flows a second for d (loadclient.OpenLoop), each on the next locker,
// until the lockers run out.
func (l *towerLoad) openLoop(ctx context.Context, rate float64, d time.Duration) {
	loadclient.OpenLoop(ctx, rate, d, 0, func(ctx context.Context, _ int, _ time.Time) {
		if i := int(l.next.Add(1) - 1); i < len(l.lockers) {
			l.flow(ctx, i)
		}
	})
}
