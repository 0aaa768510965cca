package webhook

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"
)

// Receiver is a verifying webhook receiver: it checks each delivery's signature and
// timestamp against the endpoint's secret, answers 204 to a good one and 401 to anything
// else, and hands each event to its callback once, however often it is delivered
// (at-least-once delivery: duplicates carry the same webhook-id). It is what
// `lockernet-admin webhook listen` runs, and a model for a receiver of one's own.
type Receiver struct {
	// Key is the endpoint's signing key (ParseSecret of its whsec_ secret).
	Key []byte
	// Tolerance is how far a delivery's timestamp may be from now (5 minutes when zero).
	Tolerance time.Duration
	// Event is called once per event id with the verified payload.
	Event func(Payload)
	// Duplicate, when set, is called for a redelivery of an event already handed on.
	Duplicate func(id string)
	// Refused, when set, is called with the reason a delivery was refused.
	Refused func(reason string)

	mu   sync.Mutex
	seen map[string]time.Time
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "deliveries are POSTs", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	tol := rc.Tolerance
	if tol == 0 {
		tol = 5 * time.Minute
	}
	if err := Verify(rc.Key, r.Header, body, time.Now(), tol); err != nil {
		if rc.Refused != nil {
			rc.Refused(err.Error())
		}
		http.Error(w, "signature refused", http.StatusUnauthorized)
		return
	}
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		if rc.Refused != nil {
			rc.Refused("body is not an event: " + err.Error())
		}
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	id := r.Header.Get(HeaderID)
	if rc.firstTime(id) {
		if rc.Event != nil {
			rc.Event(p)
		}
	} else if rc.Duplicate != nil {
		rc.Duplicate(id)
	}
	w.WriteHeader(http.StatusNoContent)
}

// firstTime records id and reports whether it is new. Every delivery is signed afresh (a
// retry days later passes the timestamp check), so ids are kept for a day, the span of the
// retry schedule; past 100,000 ids the older ones are dropped.
func (rc *Receiver) firstTime(id string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.seen == nil {
		rc.seen = map[string]time.Time{}
	}
	now := time.Now()
	if len(rc.seen) > 100_000 {
		for k, at := range rc.seen {
			if now.Sub(at) > 24*time.Hour {
				delete(rc.seen, k)
			}
		}
	}
	if _, ok := rc.seen[id]; ok {
		return false
	}
	rc.seen[id] = now
	return true
}
