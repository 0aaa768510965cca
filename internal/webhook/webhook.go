// Package webhook holds what both ends of a webhook delivery agree on (DESIGN §10): the
// event types, the Standard Webhooks signature and its verification, endpoint secrets, and
// the address policy that keeps a production delivery off loopback and private networks.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Types are the event types an endpoint can ask for (DESIGN §10).
var Types = []string{
	"reservation.created", "reservation.cancelled", "reservation.expired",
	"locker.dropoff_completed", "locker.pickup_completed", "locker.released", "locker_token.expired",
	"locker.out_of_service", "locker.in_service",
	"access_code.created", "access_code.used", "access_code.expired", "access_code.removed",
	"gateway_request.completed", "gateway_request.failed",
	"gateway.offline", "gateway.online",
	"parcel.pickup_reminder", "parcel.pickup_extended", "parcel.overdue", "parcel.return_requested", "parcel.returned",
	"locker.door_ajar", "locker.forced_open", "locker.item_left", "gateway.controller_offline", "gateway.controller_online",
	"webhook.test",
}

// KnownType reports whether t is one of Types.
func KnownType(t string) bool { return slices.Contains(Types, t) }

// DefaultRetrySchedule is the wait after each failed delivery attempt (DESIGN §10): eight
// attempts over about 27 hours, then the delivery is failed. It is the one definition of the
// schedule: LOCKERNET_WEBHOOK_RETRY_SCHEDULE's default (package config) and the delivery
// activity's when it is given none. Each call returns a fresh slice.
func DefaultRetrySchedule() []time.Duration {
	return []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
		5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
}

// SecretPrefix starts every endpoint secret.
const SecretPrefix = "whsec_"

// NewSecret returns a fresh endpoint secret ("whsec_" and the base64 of 32 random bytes) and
// the key it stands for.
func NewSecret() (string, []byte) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), key
}

// ParseSecret returns the signing key of a "whsec_..." secret.
func ParseSecret(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
	if err != nil || !strings.HasPrefix(s, SecretPrefix) || len(b) < 16 {
		return nil, errors.New("webhook secret: expected whsec_ followed by base64")
	}
	return b, nil
}

// Header names of a delivery (Standard Webhooks).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Sign returns the "v1,<base64>" signature of a message under key.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignatureHeader signs with every key (the current secret first, then the one a rotation
// keeps valid), space-separated.
func SignatureHeader(keys [][]byte, id string, timestamp int64, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = Sign(k, id, timestamp, body)
	}
	return strings.Join(sigs, " ")
}

// ErrSignature means no signature of a delivery matched the receiver's secret.
var ErrSignature = errors.New("webhook: no matching signature")

// Verify checks a received delivery against key: one of the header's v1 signatures must
// match, and the timestamp must be within tolerance of now (replays are refused).
func Verify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, tsRaw, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsRaw == "" || sigs == "" {
		return errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	}
	ts, err := strconv.ParseInt(tsRaw, 10, 64)
	if err != nil {
		return errors.New("webhook: webhook-timestamp is not Unix seconds")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook: timestamp %s is outside the %s tolerance", time.Unix(ts, 0).UTC().Format(time.RFC3339), tolerance)
	}
	want := Sign(key, id, ts, body)
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return ErrSignature
}

// EventIDPrefix starts every event id ("evt_<uuid>").
const EventIDPrefix = "evt_"

// Payload is the body of a delivery and an entry of the event log.
type Payload struct {
	ID                string          `json:"id"`
	Type              string          `json:"type"`
	CreatedAt         string          `json:"created_at"`
	OrganizationID    int64           `json:"organization_id"`
	SubOrganizationID *int64          `json:"sub_organization_id"`
	Data              json.RawMessage `json:"data"`
}

// TimeFormat is how event times are written: RFC 3339, UTC, milliseconds (DESIGN §8).
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// NewPayload builds the payload of an event.
func NewPayload(id uuid.UUID, typ string, createdAt time.Time, orgID int64, subOrgID *int64, data json.RawMessage) Payload {
	return Payload{ID: EventIDPrefix + id.String(), Type: typ, CreatedAt: createdAt.UTC().Format(TimeFormat),
		OrganizationID: orgID, SubOrganizationID: subOrgID, Data: data}
}
