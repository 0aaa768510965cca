package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

// settleInterrupted answers a keyed request whose intent an earlier run of the gateway
// recorded and whose result it never did: the run stopped or died between the two, so the
// lock may or may not have been pulsed. For a door open (POST /lockers/{id}/open, POST
// /transactions/{id}/open) it reads the door through its controller: a door that reads open
// answers the open's own success answer, kept as the key's result like any open's; a door
// that reads shut answers 500 REQUEST_OUTCOME_UNKNOWN, kept too (a later read could only see
// later opens); a door that cannot be read answers REQUEST_OUTCOME_UNKNOWN without keeping
// it, so a later repeat reads it again. Any other request (a transaction's create or release,
// a locker's service state, open-all) has no read that settles it as safely and answers
// REQUEST_OUTCOME_UNKNOWN, not kept. Each settled open writes an event-log line.
func (s *Server) settleInterrupted(ctx context.Context, key string, k keptKey) (recordedAnswer, keyFate) {
	rec := &answerRecorder{header: http.Header{}}
	lk, fields, ok := s.interruptedOpen(ctx, k)
	if !ok {
		writeError(rec, CodeRequestOutcomeUnknown, "the request with this Idempotency-Key was begun before the gateway restarted; "+
			"whether it was carried out is unknown (check the locker and the log)", nil)
		return rec.answer(), leaveUnknown
	}
	fields["idempotencyKey"] = key
	opened, err := s.readDoor(ctx, lk)
	details := map[string]any{"lockerId": lk.LockerID}
	switch {
	case err != nil:
		fields["error"] = err.Error()
		s.event(ctx, slog.LevelWarn, "door open unconfirmed after a restart: the door cannot be read", fields)
		writeError(rec, CodeRequestOutcomeUnknown, fmt.Sprintf("the open of locker %d with this Idempotency-Key was begun before the gateway restarted, "+
			"and its door cannot be read; whether it opened is unknown (check the locker)", lk.LockerID), details)
		return rec.answer(), leaveUnknown
	case opened:
		s.event(ctx, slog.LevelInfo, "door open confirmed after a restart: the door reads open", fields)
		writeOpened(rec, lk)
		return rec.answer(), keepAnswer
	}
	s.event(ctx, slog.LevelWarn, "door open unconfirmed after a restart: the door reads shut", fields)
	writeError(rec, CodeRequestOutcomeUnknown, fmt.Sprintf("the open of locker %d with this Idempotency-Key was begun before the gateway restarted, "+
		"and its door reads shut; whether it was pulsed is unknown, and the gateway does not pulse it again (check the locker)", lk.LockerID), details)
	return rec.answer(), keepAnswer
}

// interruptedOpen is the locker a recorded request opens, with the event-log fields of its
// open, when the request is a door open of one locker: a maintenance open, or an open by
// transaction (the transaction's locker, released or not).
func (s *Server) interruptedOpen(ctx context.Context, k keptKey) (lockerInfo, map[string]any, bool) {
	parts := strings.Split(strings.Trim(k.path, "/"), "/")
	if k.method != http.MethodPost || len(parts) != 3 || parts[2] != "open" {
		return lockerInfo{}, nil, false
	}
	switch parts[0] {
	case "lockers":
		id, err := strconv.Atoi(parts[1])
		lk, ok := s.lockers[id]
		if err != nil || !ok {
			return lockerInfo{}, nil, false
		}
		return lk, map[string]any{"lockerId": lk.LockerID, "name": lk.Name, "via": "maintenance"}, true
	case "transactions":
		t, err := s.store.transaction(ctx, parts[1])
		if err != nil {
			if !errors.Is(err, errNotFound) {
				s.logger.ErrorContext(ctx, "read the transaction of an interrupted open", "transactionId", parts[1], "err", err)
			}
			return lockerInfo{}, nil, false
		}
		lk, ok := s.lockers[t.LockerID]
		if !ok {
			return lockerInfo{}, nil, false
		}
		return lk, map[string]any{"lockerId": lk.LockerID, "name": lk.Name, "via": "transaction", "transactionId": t.ID}, true
	}
	return lockerInfo{}, nil, false
}

// readDoor reads a locker's door through its controller under the open policy: up to its
// attempts, each within its attempt timeout and its delay apart, trying again only after a
// communication failure or a timeout.
func (s *Server) readDoor(ctx context.Context, lk lockerInfo) (opened bool, err error) {
	b := s.hw.byCtl[lk.Controller]
	pol := s.cfg.Open
	for attempt := 1; attempt <= pol.Attempts; attempt++ {
		if attempt > 1 {
			if stop := lockctl.Sleep(ctx, pol.RetryDelay); stop != nil {
				return false, fmt.Errorf("read door of locker %d: %w (after %w)", lk.LockerID, stop, err)
			}
		}
		opened, err = s.readBackDoor(ctx, b, lk)
		if err == nil {
			b.noteResult(nil)
			return opened, nil
		}
		if !lockctl.Retryable(err) && !errors.Is(err, context.DeadlineExceeded) {
			break
		}
	}
	b.noteResult(err)
	return false, fmt.Errorf("read door of locker %d: %w", lk.LockerID, err)
}
