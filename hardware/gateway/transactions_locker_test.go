package gateway_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// A create may ask for one particular locker (the cloud holds an access code's locker so).
func TestCreateTransactionForOneLocker(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetTwoBanks})

	tx := createTransaction(t, gw, map[string]any{"transactionId": "code-1", "lockerId": 105})
	assert.Equal(t, 105, tx.LockerID)

	// Taken now: no free locker matches.
	requireError(t, call(t, gw, http.MethodPost, "/transactions", map[string]any{"transactionId": "code-2", "lockerId": 105}),
		http.StatusNotFound, gateway.CodeNoAvailableLockers)
	// A locker the gateway does not have.
	requireError(t, call(t, gw, http.MethodPost, "/transactions", map[string]any{"lockerId": 999}),
		http.StatusNotFound, gateway.CodeLockerNotFound)
	// The other criteria still apply: locker 105 is not of type 3.
	requireError(t, call(t, gw, http.MethodPost, "/transactions", map[string]any{"lockerId": 106, "lockerTypeId": 3}),
		http.StatusNotFound, gateway.CodeNoAvailableLockers)
	// Out of service: not assignable.
	setOutOfService(t, gw, 107, true)
	requireError(t, call(t, gw, http.MethodPost, "/transactions", map[string]any{"lockerId": 107}),
		http.StatusNotFound, gateway.CodeNoAvailableLockers)
	// Bad ids.
	requireError(t, call(t, gw, http.MethodPost, "/transactions", map[string]any{"lockerId": "abc"}),
		http.StatusUnprocessableEntity, gateway.CodeValidation)

	// Released, it can be held again.
	r := call(t, gw, http.MethodDelete, "/transactions/code-1", nil)
	assert.Equal(t, http.StatusNoContent, r.status)
	assert.Equal(t, 105, createTransaction(t, gw, map[string]any{"transactionId": "code-3", "lockerId": "105"}).LockerID)
}
