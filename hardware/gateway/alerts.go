package gateway

import (
	"net/http"
	"strconv"
	"time"
)

// Bounds of GET /alerts.
const (
	defaultAlertLimit = 100
	maxAlertLimit     = 1000
	// MaxAlertWait bounds GET /alerts?wait= (seconds): a long poll stays below the usual
	// 30 s idle timeouts of proxies between the cloud and the gateway.
	MaxAlertWait = 25
)

// alertQuery is GET /alerts's query.
type alertQuery struct {
	after int64
	limit int
	wait  time.Duration
}

func parseAlertQuery(r *http.Request) (alertQuery, error) {
	q := alertQuery{limit: defaultAlertLimit}
	v := r.URL.Query()
	if raw := v.Get("after"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			return q, validationError("after", "must be an integer of 0 or more (the last seq seen)")
		}
		q.after = n
	}
	if raw := v.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxAlertLimit {
			return q, validationError("limit", "must be an integer from 1 to "+strconv.Itoa(maxAlertLimit))
		}
		q.limit = n
	}
	if raw := v.Get("wait"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || n > MaxAlertWait {
			return q, validationError("wait", "must be an integer from 0 to "+strconv.Itoa(MaxAlertWait)+" (seconds)")
		}
		q.wait = time.Duration(n) * time.Second
	}
	return q, nil
}

// listAlerts answers GET /alerts: the alerts after the cursor, at once when there are some,
// else once one is raised or wait has passed (an empty list), or at once when the gateway
// begins to stop. A cursor past the last seq this log ever gave is another log's (the
// gateway's database is new): the answer comes at once, and its stream tells the caller.
func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request) error {
	q, err := parseAlertQuery(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	stream, last, err := s.store.alertLog(ctx)
	if err != nil {
		return err
	}
	var deadline <-chan time.Time
	if q.wait > 0 && q.after <= last {
		t := time.NewTimer(q.wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		// Taken before the read, so an alert stored in between wakes this poll.
		changed := s.watch.changed()
		rows, err := s.store.alertsAfter(ctx, q.after, q.limit)
		if err != nil {
			return err
		}
		if len(rows) > 0 || deadline == nil {
			writeJSON(w, http.StatusOK, s.alertList(rows, q.after, stream))
			return nil
		}
		select {
		case <-changed:
		case <-deadline:
			deadline = nil
		case <-s.work.stopped():
			deadline = nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) alertList(rows []alertRow, after int64, stream string) AlertList {
	out := AlertList{Alerts: make([]Alert, 0, len(rows)), Next: after, Stream: stream}
	for _, a := range rows {
		v := Alert{Seq: a.Seq, Kind: a.Kind, GatewayID: s.cfg.GatewayID, LockerID: a.LockerID, BankID: a.BankID,
			ControllerID: a.ControllerID, At: formatTime(a.At), Message: a.Message, TransactionID: a.TransactionID}
		if a.LockerID != nil {
			if lk, ok := s.lockers[*a.LockerID]; ok {
				name := lk.Name
				v.LockerName = &name
			}
		}
		out.Alerts = append(out.Alerts, v)
		out.Next = a.Seq
	}
	return out
}
