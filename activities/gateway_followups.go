package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

// What a settled gateway request means beyond itself (DESIGN §5): the transaction row of an
// access-code open or close, or of a transaction created through the cloud API; a
// single-use code given back when its open never reached the gateway, or its hold released
// when the open went through. The rules are here; the store writes what they decide, once,
// however often a retried activity asks.

// followUp applies what a settled request means and returns the access code whose workflow
// is to release its hold (a single-use code that opened), if any.
func (a *Activities) followUp(ctx context.Context, r store.GatewayRequest) (usedCode string, err error) {
	switch r.Kind {
	case gatewayreq.KindAccessCodeOpen:
		codeID, err := uuid.Parse(r.Subject)
		if err != nil {
			return "", fmt.Errorf("access-code open request %s: subject %q is no code id", r.ID, r.Subject)
		}
		c, err := a.AccessCodes.AccessCode(ctx, r.OrganizationID, codeID)
		if err != nil {
			return "", fmt.Errorf("read access code: %w", err)
		}
		if err := a.AccessCodes.SettleCodeOpen(ctx, r, codeID, codeOpenEffect(r.Outcome, c.SingleUse)); err != nil {
			return "", err
		}
		if usesUpCode(r.Outcome, c.SingleUse) {
			return codeID.String(), nil
		}
		return "", nil
	case gatewayreq.KindAccessCodeClose:
		lockerID, err := strconv.Atoi(r.Subject)
		if err != nil {
			return "", fmt.Errorf("access-code close request %s: subject %q is no locker id", r.ID, r.Subject)
		}
		return "", a.AccessCodes.RecordGatewayTransaction(ctx, r, store.GatewayTransaction{Type: "close", Status: closeStatus(r.Outcome), LockerID: lockerID})
	case gatewayreq.KindCreateTransaction:
		t, ok := createdTransaction(r.Outcome)
		if !ok {
			return "", nil
		}
		return "", a.AccessCodes.RecordGatewayTransaction(ctx, r, t)
	}
	return "", nil
}

// codeOpenEffect decides what an access-code open's outcome does to its code: a door that
// opened records the use; a single-use code, consumed before the open was sent, is given
// back when the open never reached the gateway (the door did not open). Any other failure
// keeps it consumed: the door may have opened. An open whose outcome is unknown
// (gateway_unresponsive) is recorded as unknown, never as failed (DESIGN §6.2).
func codeOpenEffect(o gatewayreq.Outcome, singleUse bool) store.CodeOpenEffect {
	e := store.CodeOpenEffect{Status: "failed"}
	switch {
	case gatewayreq.Opened(o):
		e.Status, e.Used = "opened", true
	case o.Status == gatewayreq.StateGatewayUnresponsive:
		e.Status = gatewayreq.OutcomeUnknown
	}
	e.Restore = singleUse && o.Status == gatewayreq.StateDispatchFailed
	return e
}

// usesUpCode says whether an open's outcome uses up a single-use code, so its workflow
// releases the locker's hold: the gateway carried the open out (any 2xx, even one that says
// the door did not open: the code was spent on it).
func usesUpCode(o gatewayreq.Outcome, singleUse bool) bool {
	return singleUse && o.Status == gatewayreq.StateCompleted && o.HTTPStatus/100 == 2
}

// closeStatus is the transaction row's status of an access-code close: what the door sensor
// read (closed, door_open), or failed when the gateway did not answer the read.
func closeStatus(o gatewayreq.Outcome) string {
	if o.Status != gatewayreq.StateCompleted || o.HTTPStatus != http.StatusOK {
		return "failed"
	}
	if gatewayreq.ReadDoor(o).DoorOpen {
		return "door_open"
	}
	return "closed"
}

// createdTransaction is the transaction row of a create the gateway answered 201: the
// gateway's TransactionResponse names the transaction and the locker it assigned. Anything
// else records nothing.
func createdTransaction(o gatewayreq.Outcome) (store.GatewayTransaction, bool) {
	if o.Status != gatewayreq.StateCompleted || o.HTTPStatus != http.StatusCreated {
		return store.GatewayTransaction{}, false
	}
	var tr struct {
		TransactionID string `json:"transactionId"`
		LockerID      int    `json:"lockerId"`
	}
	if json.Unmarshal(o.Body, &tr) != nil {
		return store.GatewayTransaction{}, false // the gateway's own body, mirrored; nothing to record from it
	}
	return store.GatewayTransaction{Type: "gateway_transaction", Status: "created", LockerID: tr.LockerID, OrderRef: tr.TransactionID}, true
}
