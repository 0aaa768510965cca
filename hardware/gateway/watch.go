package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/lockernet/lockernet/hardware/gateway/gwapi"
	"github.com/lockernet/lockernet/hardware/lockctl"
)

// WatchConfig is the watch of the lock controllers: every Interval each controller's door
// sensors are read and turned into alerts (GET /alerts, the event log, the metric
// gateway_alerts_total). The rules, each raised once per episode:
//
//   - controller_offline: OfflineAfter reads in a row fail; controller_online: the first
//     read that answers after it.
//   - forced_open: a door read shut and then open with no open sent by the gateway for that
//     locker within ForcedOpenGrace before; the locker is taken out of service at once
//     (reason code FORCED_OPEN). A door already open at the first read is not judged.
//   - door_ajar: a door read open for DoorAjarAfter (from the first read that saw it open);
//     the episode ends when it reads shut.
//   - item_left: a transaction released after at least one open under it is a pickup; the
//     first read of its locker's door shut ends the pickup, with an alert when the presence
//     sensor is on. An open of the locker by the gateway in between ends it without one
//     (openDoor drops the locker's pickup check before the lock is pulsed).
type WatchConfig struct {
	// Interval between two reads; zero or less leaves the controllers unwatched.
	Interval time.Duration
	// DoorAjarAfter is how long a door may stay open (default 60 s).
	DoorAjarAfter time.Duration
	// ForcedOpenGrace is how long after an open sent by the gateway a door may be seen
	// opening without it being forced (default 30 s).
	ForcedOpenGrace time.Duration
	// OfflineAfter is how many failed reads in a row make a controller offline (default 3).
	OfflineAfter int
}

// Defaults of WatchConfig.
const (
	DefaultWatchInterval   = time.Second
	DefaultDoorAjarAfter   = 60 * time.Second
	DefaultForcedOpenGrace = 30 * time.Second
	DefaultOfflineAfter    = 3
)

func (c *WatchConfig) defaults() {
	if c.DoorAjarAfter <= 0 {
		c.DoorAjarAfter = DefaultDoorAjarAfter
	}
	if c.ForcedOpenGrace <= 0 {
		c.ForcedOpenGrace = DefaultForcedOpenGrace
	}
	if c.OfflineAfter <= 0 {
		c.OfflineAfter = DefaultOfflineAfter
	}
}

// watch is the state of the watch: what it last read of every controller and door, and the
// opens the gateway sent.
type watch struct {
	cfg WatchConfig

	mu     sync.Mutex
	opens  map[int]time.Time // locker id → the last open sent by the gateway
	notify chan struct{}     // closed and replaced when an alert is stored

	banks map[string]*bankWatch // only the watch loop touches these

	stop chan struct{}
	done chan struct{}
}

type bankWatch struct {
	failures int
	offline  bool
	doors    map[int]*doorWatch // by locker id
}

type doorWatch struct {
	open       bool
	openSince  time.Time
	ajarRaised bool
}

func newWatch(cfg WatchConfig) *watch {
	cfg.defaults()
	return &watch{cfg: cfg, opens: map[int]time.Time{}, notify: make(chan struct{}), banks: map[string]*bankWatch{},
		stop: make(chan struct{}), done: make(chan struct{})}
}

// noteOpen records an open of a locker sent by the gateway, before it is sent and again once
// it is done, so the door springing open is never taken for a forced one.
func (w *watch) noteOpen(lockerID int, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.opens[lockerID] = at
}

func (w *watch) lastOpen(lockerID int) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.opens[lockerID]
	return t, ok
}

// changed is closed when the next alert is stored.
func (w *watch) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.notify
}

func (w *watch) signal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.notify)
	w.notify = make(chan struct{})
}

// startWatch runs the watch until stopWatch, when the config asks for one.
func (s *Server) startWatch() {
	if s.cfg.Watch.Interval <= 0 {
		close(s.watch.done)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The first read is made before the gateway serves: what it sees is the baseline every
	// later change is judged against (at most one sensor timeout per controller).
	s.watchOnce(ctx, time.Now())
	go func() {
		defer close(s.watch.done)
		defer cancel()
		go func() {
			<-s.watch.stop
			cancel()
		}()
		t := time.NewTicker(s.cfg.Watch.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.watchOnce(ctx, time.Now())
		}
	}()
}

// stopWatch ends the watch loop and waits for its pass in flight.
func (s *Server) stopWatch() {
	select {
	case <-s.watch.stop:
	default:
		close(s.watch.stop)
	}
	<-s.watch.done
}

// bankRead is one read of a bank's door sensors.
type bankRead struct {
	doors map[int]lockctl.Door
	err   error
}

// watchOnce reads every controller once and raises what the reads show. The pickup checks
// are read before the doors, so a check is only ever judged by a read made after its release.
func (s *Server) watchOnce(ctx context.Context, now time.Time) {
	pickups, err := s.store.pickupChecks(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.logger.WarnContext(ctx, "watch: read pickup checks", "err", err)
		pickups = nil
	}
	reads := make([]bankRead, len(s.hw.banks))
	s.hw.eachBank(ctx, func(rctx context.Context, i int, b *bank) {
		doors, err := b.ctl.Doors(rctx)
		if ctx.Err() != nil {
			return
		}
		b.noteResult(err)
		if err == nil {
			b.mu.Lock()
			// A copy: the open path marks doors open in b.doors while this read is judged.
			b.doors = maps.Clone(doors)
			b.mu.Unlock()
		}
		reads[i] = bankRead{doors: doors, err: err}
	})
	if ctx.Err() != nil {
		return
	}
	for i, b := range s.hw.banks {
		s.watchBank(ctx, b, reads[i], pickups, now)
	}
}

func (s *Server) watchBank(ctx context.Context, b *bank, rd bankRead, pickups map[int]pickupCheck, now time.Time) {
	ctl := b.spec.Controller.ID
	bw := s.watch.banks[ctl]
	if bw == nil {
		bw = &bankWatch{doors: map[int]*doorWatch{}}
		s.watch.banks[ctl] = bw
	}
	controllerAlert := func(kind, msg string, fields map[string]any) {
		s.raise(ctx, alertRow{Kind: kind, BankID: b.spec.ID, ControllerID: ctl, At: now, Message: msg}, alertChange{}, fields)
	}
	if rd.err != nil {
		bw.failures++
		if bw.failures >= s.watch.cfg.OfflineAfter && !bw.offline {
			bw.offline = true
			controllerAlert(gwapi.AlertControllerOffline,
				fmt.Sprintf("lock controller %s did not answer %d reads in a row", ctl, bw.failures),
				map[string]any{"error": rd.err.Error(), "failedReads": bw.failures})
		}
		return
	}
	bw.failures = 0
	if bw.offline {
		bw.offline = false
		controllerAlert(gwapi.AlertControllerOnline, fmt.Sprintf("lock controller %s answers again", ctl), nil)
	}
	for _, spec := range b.spec.Lockers {
		d, ok := rd.doors[spec.Channel]
		if !ok {
			continue
		}
		s.watchDoor(ctx, b, bw, spec, d, pickups, now)
	}
}

func (s *Server) watchDoor(ctx context.Context, b *bank, bw *bankWatch, spec LockerSpec, d lockctl.Door, pickups map[int]pickupCheck, now time.Time) {
	id := spec.LockerID
	lockerAlert := func(kind, msg string, ch alertChange, txID *string, fields map[string]any) {
		s.raise(ctx, alertRow{Kind: kind, LockerID: &id, BankID: b.spec.ID, ControllerID: b.spec.Controller.ID, At: now,
			Message: msg, TransactionID: txID}, ch, fields)
	}
	dw := bw.doors[id]
	switch {
	case dw == nil:
		// The first read: a door already open is timed from now, not judged.
		dw = &doorWatch{open: d.Open, openSince: now}
		bw.doors[id] = dw
	case d.Open && !dw.open:
		dw.open, dw.openSince, dw.ajarRaised = true, now, false
		last, sent := s.watch.lastOpen(id)
		if !sent || now.Sub(last) > s.watch.cfg.ForcedOpenGrace {
			code := gwapi.ReasonForcedOpen
			reason := "door seen open with no open sent by the gateway"
			lockerAlert(gwapi.AlertForcedOpen, fmt.Sprintf("locker %d (%s) was opened without an open from the gateway; "+
				"taken out of service", id, spec.Name),
				alertChange{outOfService: &lockerState{OutOfService: true, ReasonCode: &code, Reason: &reason}}, nil,
				map[string]any{"reasonCode": code})
		}
	case !d.Open && dw.open:
		dw.open, dw.ajarRaised = false, false
	}
	if dw.open && !dw.ajarRaised && now.Sub(dw.openSince) >= s.watch.cfg.DoorAjarAfter {
		dw.ajarRaised = true
		lockerAlert(gwapi.AlertDoorAjar, fmt.Sprintf("the door of locker %d (%s) has been open for %s", id, spec.Name,
			now.Sub(dw.openSince).Round(time.Second)), alertChange{}, nil,
			map[string]any{"openSince": formatTime(dw.openSince)})
	}
	p, armed := pickups[id]
	if !armed || d.Open {
		return
	}
	if !s.store.pickupArmed(ctx, p) {
		// Opened again by the gateway since this pass read the checks: a new use of the
		// locker, not the pickup's door.
		return
	}
	if !d.ItemInside {
		if err := s.store.endPickupCheck(ctx, id, p.TransactionID); err != nil {
			s.logger.WarnContext(ctx, "watch: end pickup check", "lockerId", id, "err", err)
		}
		return
	}
	txID := p.TransactionID
	lockerAlert(gwapi.AlertItemLeft, fmt.Sprintf("locker %d (%s) still holds an item after the pickup of transaction %s",
		id, spec.Name, txID), alertChange{pickupDone: true}, &txID, nil)
}

// raise stores an alert with its change, counts it, writes it to the event log and wakes
// the long polls of GET /alerts. A failed write is logged and the alert is lost: the
// watch goes on.
func (s *Server) raise(ctx context.Context, a alertRow, ch alertChange, extra map[string]any) {
	seq, err := s.store.insertAlert(context.WithoutCancel(ctx), a, ch)
	if err != nil {
		s.logger.ErrorContext(ctx, "watch: store alert", "kind", a.Kind, "err", err)
		return
	}
	s.metrics.alerts.WithLabelValues(a.Kind).Inc()
	fields := map[string]any{"alert": a.Kind, "seq": seq, "bankId": a.BankID, "controllerId": a.ControllerID}
	if a.LockerID != nil {
		fields["lockerId"] = *a.LockerID
		fields["name"] = s.lockers[*a.LockerID].Name
	}
	if a.TransactionID != nil {
		fields["transactionId"] = *a.TransactionID
	}
	for k, v := range extra {
		fields[k] = v
	}
	s.event(ctx, slog.LevelWarn, a.Message, fields)
	s.watch.signal()
}
