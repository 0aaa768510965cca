package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

var (
	// errHardwareFault: the controller reported a fault; not retried.
	errHardwareFault = errors.New("hardware fault")
	// errControllerUnavailable: no answer after every attempt.
	errControllerUnavailable = errors.New("controller unavailable")
	// errControllerError: the controller refused the command for another reason.
	errControllerError = errors.New("controller error")
	// errOpenUnconfirmed: the open went out to the controller and nothing confirmed
	// it: the door may or may not have moved.
	errOpenUnconfirmed = errors.New("open not confirmed")
)

// openOutcome is the result of driving one door open.
type openOutcome struct {
	Attempts int
	Err      error // nil, or wraps one of the err* sentinels above, or ctx.Err()
}

// openDoor drives a locker's door open under the open policy: each attempt is
// bounded by AttemptTimeout; communication errors and attempt timeouts are
// retried after RetryDelay up to Attempts times; a reported hardware fault or
// any other controller error ends it at once. An open the controller sent without
// learning its outcome (lockctl.ErrOutcomeUnknown) is never sent again: the
// attempts left read the door instead, and an open door is the open done; a door
// that reads shut, or cannot be read, leaves the outcome unknown. It stops early
// if ctx ends.
func (s *Server) openDoor(ctx context.Context, lk lockerInfo) openOutcome {
	b := s.hw.byCtl[lk.Controller]
	pol := s.cfg.Open
	// The watch must not take this door springing open for a forced one, nor read it, once
	// shut again, as the door of an earlier pickup (a new use of the locker begins).
	s.watch.noteOpen(lk.LockerID, time.Now())
	defer func() { s.watch.noteOpen(lk.LockerID, time.Now()) }()
	if err := s.store.dropPickupCheck(context.WithoutCancel(ctx), lk.LockerID); err != nil {
		s.logger.WarnContext(ctx, "drop the pickup check of a locker being opened", "lockerId", lk.LockerID, "err", err)
	}
	var lastErr, unconfirmed error
	for attempt := 1; attempt <= pol.Attempts; attempt++ {
		if attempt > 1 {
			if stop := lockctl.Sleep(ctx, pol.RetryDelay); stop != nil {
				if unconfirmed != nil {
					return s.openDone(lk, openOutcome{Attempts: attempt - 1, Err: fmt.Errorf("open locker %d: %w: %w (and %w)",
						lk.LockerID, errOpenUnconfirmed, unconfirmed, stop)})
				}
				return s.openDone(lk, openOutcome{Attempts: attempt - 1, Err: fmt.Errorf("open locker %d: %w", lk.LockerID, stop)})
			}
		}
		if unconfirmed != nil {
			opened, err := s.readBackDoor(ctx, b, lk)
			switch {
			case opened:
				s.metrics.openAttempts.WithLabelValues("read_back_open").Inc()
				return s.openDone(lk, openOutcome{Attempts: attempt})
			case err == nil:
				// Shut: the pulse did not happen, or the door was shut again since.
				// Either way, pulsing again could open it twice.
				s.metrics.openAttempts.WithLabelValues("read_back_shut").Inc()
				return s.openDone(lk, openOutcome{Attempts: attempt, Err: fmt.Errorf("open locker %d: %w: %w; the door reads shut",
					lk.LockerID, errOpenUnconfirmed, unconfirmed)})
			}
			s.metrics.openAttempts.WithLabelValues("read_back_failed").Inc()
			s.logger.WarnContext(ctx, "door read-back after an unconfirmed open failed", "lockerId", lk.LockerID, "attempt", attempt, "err", err)
			continue
		}
		actx, cancel := context.WithTimeout(ctx, pol.AttemptTimeout)
		err := b.ctl.Open(actx, lk.Channel)
		cancel()
		switch {
		case err == nil:
			s.metrics.openAttempts.WithLabelValues("ok").Inc()
			b.noteResult(nil)
			b.setDoor(lk.Channel, true)
			return s.openDone(lk, openOutcome{Attempts: attempt})
		case ctx.Err() != nil && errors.Is(err, lockctl.ErrOutcomeUnknown):
			s.metrics.openAttempts.WithLabelValues("outcome_unknown").Inc()
			return s.openDone(lk, openOutcome{Attempts: attempt, Err: fmt.Errorf("open locker %d: %w: %w", lk.LockerID, errOpenUnconfirmed, err)})
		case ctx.Err() != nil:
			// The caller gave up (not an attempt timeout): stop, and say nothing
			// about the controller.
			s.metrics.openAttempts.WithLabelValues("cancelled").Inc()
			return s.openDone(lk, openOutcome{Attempts: attempt, Err: fmt.Errorf("open locker %d: %w", lk.LockerID, ctx.Err())})
		case errors.Is(err, lockctl.ErrHardwareFault):
			s.metrics.openAttempts.WithLabelValues("hardware_fault").Inc()
			b.noteResult(err)
			return s.openDone(lk, openOutcome{Attempts: attempt, Err: fmt.Errorf("open locker %d: %w: %w", lk.LockerID, errHardwareFault, err)})
		case errors.Is(err, lockctl.ErrOutcomeUnknown):
			s.metrics.openAttempts.WithLabelValues("outcome_unknown").Inc()
			unconfirmed = err
		case lockctl.Retryable(err):
			s.metrics.openAttempts.WithLabelValues("comm_error").Inc()
		case errors.Is(err, context.DeadlineExceeded):
			s.metrics.openAttempts.WithLabelValues("timeout").Inc()
		default:
			s.metrics.openAttempts.WithLabelValues("error").Inc()
			return s.openDone(lk, openOutcome{Attempts: attempt, Err: fmt.Errorf("open locker %d: %w: %w", lk.LockerID, errControllerError, err)})
		}
		lastErr = err
		s.logger.WarnContext(ctx, "door open attempt failed", "lockerId", lk.LockerID, "attempt", attempt, "err", err)
	}
	b.noteResult(lastErr)
	if unconfirmed != nil {
		return s.openDone(lk, openOutcome{Attempts: pol.Attempts, Err: fmt.Errorf("open locker %d: %w: %w; the door could not be read back",
			lk.LockerID, errOpenUnconfirmed, unconfirmed)})
	}
	return s.openDone(lk, openOutcome{Attempts: pol.Attempts, Err: fmt.Errorf("open locker %d: %w: %w", lk.LockerID, errControllerUnavailable, lastErr)})
}

// readBackDoor reads a locker's door after an open whose outcome is unknown, within
// one attempt's time.
func (s *Server) readBackDoor(ctx context.Context, b *bank, lk lockerInfo) (opened bool, err error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.Open.AttemptTimeout)
	defer cancel()
	doors, err := b.ctl.Doors(actx)
	if err != nil {
		return false, err
	}
	d, ok := doors[lk.Channel]
	if !ok {
		return false, fmt.Errorf("read door of channel %d: %w", lk.Channel, lockctl.ErrUnknownChannel)
	}
	b.setDoor(lk.Channel, d.Open)
	return d.Open, nil
}

func (s *Server) openDone(lk lockerInfo, o openOutcome) openOutcome {
	outcome := "opened"
	switch {
	case o.Err == nil:
	case errors.Is(o.Err, errHardwareFault):
		outcome = "hardware_fault"
	case errors.Is(o.Err, errControllerUnavailable):
		outcome = "controller_unavailable"
	case errors.Is(o.Err, errControllerError):
		outcome = "controller_error"
	case errors.Is(o.Err, errOpenUnconfirmed):
		outcome = "outcome_unknown"
	default:
		outcome = "cancelled"
	}
	s.metrics.doorOpens.WithLabelValues(outcome).Inc()
	return o
}

// openAndRecord opens a door, writes the event log, and maps a failure to its
// API error (with lockerId in details). via says who asked ("transaction",
// "maintenance", "open-all", "admin").
func (s *Server) openAndRecord(ctx context.Context, lk lockerInfo, via string, extra map[string]any) (openOutcome, error) {
	o := s.openDoor(ctx, lk)
	fields := map[string]any{"lockerId": lk.LockerID, "name": lk.Name, "via": via, "attempts": o.Attempts}
	for k, v := range extra {
		fields[k] = v
	}
	if key, ok := ctx.Value(idempotencyKeyContext{}).(string); ok {
		// The cloud's gateway request id: the line says which request moved the door.
		fields["idempotencyKey"] = key
	}
	if o.Err == nil {
		s.event(ctx, slog.LevelInfo, "door opened", fields)
		return o, nil
	}
	fields["error"] = o.Err.Error()
	s.event(ctx, slog.LevelError, "door open failed", fields)
	return o, openError(lk.LockerID, o)
}

// writeOpened writes the answer of a door open carried out.
func writeOpened(w http.ResponseWriter, lk lockerInfo) {
	writeJSON(w, http.StatusOK, LockerOperationResponse{Success: true, LockerID: lk.LockerID, DoorOpen: true, Message: "locker opened"})
}

// openError maps a failed open to the API's answer.
func openError(lockerID int, o openOutcome) *apiError {
	details := map[string]any{"lockerId": lockerID, "attempts": o.Attempts}
	switch {
	case errors.Is(o.Err, errHardwareFault):
		return newAPIError(CodeHardwareFault,
			fmt.Sprintf("the lock controller reported a hardware fault on locker %d", lockerID), details)
	case errors.Is(o.Err, errControllerUnavailable):
		return newAPIError(CodeControllerUnavailable,
			fmt.Sprintf("the lock controller of locker %d did not answer after %d attempts", lockerID, o.Attempts), details)
	case errors.Is(o.Err, errControllerError):
		return newAPIError(CodeControllerError,
			fmt.Sprintf("the lock controller refused to open locker %d", lockerID), details)
	case errors.Is(o.Err, errOpenUnconfirmed):
		return newAPIError(CodeRequestOutcomeUnknown,
			fmt.Sprintf("the open of locker %d went out to its lock controller and neither its answer nor a read of the door confirmed it; "+
				"whether the door moved is unknown, and the gateway does not pulse it again (check the locker)", lockerID), details)
	}
	// The client went away; whatever we write is not read.
	return newAPIError(CodeControllerUnavailable,
		fmt.Sprintf("the open of locker %d was abandoned", lockerID), details)
}
