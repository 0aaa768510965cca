package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

func TestReceiverVerifiesAndDeduplicates(t *testing.T) {
	_, key := NewSecret()
	var events []Payload
	var dups, refused int
	rc := &Receiver{Key: key, Event: func(p Payload) { events = append(events, p) },
		Duplicate: func(string) { dups++ }, Refused: func(string) { refused++ }}
	send := func(k []byte, id string, ts time.Time, body string) int {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
		req.Header.Set(HeaderID, id)
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set(HeaderSignature, Sign(k, id, ts.Unix(), []byte(body)))
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		return w.Code
	}
	body := `{"id":"evt_1","type":"webhook.test","created_at":"2026-11-26T10:00:00.000Z","organization_id":1,"sub_organization_id":null,"data":{}}`
	if c := send(key, "evt_1", time.Now(), body); c != http.StatusNoContent {
		t.Fatalf("good delivery: %d", c)
	}
	if c := send(key, "evt_1", time.Now(), body); c != http.StatusNoContent {
		t.Fatalf("redelivery: %d", c)
	}
	_, other := NewSecret()
	if c := send(other, "evt_2", time.Now(), body); c != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d", c)
	}
	if c := send(key, "evt_3", time.Now().Add(-time.Hour), body); c != http.StatusUnauthorized {
		t.Fatalf("stale timestamp: %d", c)
	}
	if c := send(key, "evt_4", time.Now(), "not json"); c != http.StatusBadRequest {
		t.Fatalf("not an event: %d", c)
	}
	if len(events) != 1 || events[0].Type != "webhook.test" || dups != 1 || refused != 3 {
		t.Fatalf("events %v, duplicates %d, refused %d", events, dups, refused)
	}
}
