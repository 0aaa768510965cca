package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
)

// The inputs of the gateway cloud API's proxied operations (DESIGN §6.1): the headers, path
// parameters and bodies huma reads and documents.

// ProxyHeaders are the request headers every proxied operation reads.
type ProxyHeaders struct {
	Prefer string `header:"Prefer" doc:"RFC 7240: wait=N (seconds, clamped to [0, 30]) or respond-async" example:"wait=10"`
}

// IdempotencyHeader is the header of the mutating operations.
type IdempotencyHeader struct {
	IdempotencyKey string `header:"Idempotency-Key" minLength:"1" maxLength:"255" pattern:"^[\\x20-\\x7E]+$" doc:"Makes a retry safe: the same key with the same method, path and body answers the first request's outcome with Idempotent-Replayed: true (kept 30 days); with anything else, 422 IDEMPOTENCY_KEY_REUSED" example:"6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
}

// LocationPath addresses a gateway location.
type LocationPath struct {
	LocationID int64 `path:"locationId" minimum:"1" doc:"A location with a gateway (GET /locations)"`
}

// TransactionPath addresses a gateway transaction.
type TransactionPath struct {
	TransactionID string `path:"transactionId" pattern:"^[A-Za-z0-9._~:@-]{1,128}$" doc:"The transaction's id at the gateway"`
}

// GatewayLockerPath addresses a gateway locker.
type GatewayLockerPath struct {
	LockerID int64 `path:"lockerId" minimum:"1"`
}

// TypePath addresses a locker type or bank type.
type TypePath struct {
	ID int64 `path:"id" minimum:"1"`
}

// TransactionRef is a transaction id sent as a JSON string or a non-negative integer.
type TransactionRef string

var transactionRefSchema = &huma.Schema{OneOf: []*huma.Schema{
	{Type: "string", Pattern: "^[A-Za-z0-9._~:@-]{1,128}$"},
	{Type: "integer", Format: "int64", Minimum: ptrFloat(0)},
}, Description: "Your id for the transaction (a string, or a number); absent: the cloud uses the request id, so a re-send never assigns a second locker"}

// UnmarshalJSON accepts "abc-1" and 17.
func (t *TransactionRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = TransactionRef(s)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 {
		return errors.New("expected a string or a non-negative integer")
	}
	*t = TransactionRef(strconv.FormatInt(n, 10))
	return nil
}

// Schema documents both accepted forms.
func (TransactionRef) Schema(huma.Registry) *huma.Schema { return transactionRefSchema }

// CreateTransactionBody is the body of a transaction create (the gateway's own body).
type CreateTransactionBody struct {
	TransactionID    *TransactionRef `json:"transactionId,omitempty"`
	LockerID         *FlexID         `json:"lockerId,omitempty" doc:"Assign this particular locker (it must also match the other criteria)"`
	LockerTypeID     *FlexID         `json:"lockerTypeId,omitempty" doc:"Assign a locker of this type"`
	BankTypeID       *FlexID         `json:"bankTypeId,omitempty" doc:"Assign a locker in a bank of this type"`
	RequireLowLocker *bool           `json:"requireLowLocker,omitempty" doc:"Assign a low (accessible) locker"`
}

// PatchLockerBody takes a locker out of service or returns it.
type PatchLockerBody struct {
	OutOfService bool    `json:"outOfService" required:"true"`
	ReasonCode   *string `json:"reasonCode,omitempty" maxLength:"64"`
	Reason       *string `json:"reason,omitempty" maxLength:"500"`
}
