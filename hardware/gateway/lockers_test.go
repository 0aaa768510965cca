package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

func TestLockersAndConfig(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	lockers := decode[[]gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers", nil))
	require.Len(t, lockers, 16)
	names := map[string]bool{}
	for _, lk := range lockers {
		names[lk.Name] = true
		assert.True(t, lk.Available, "locker %d", lk.LockerID)
		assert.True(t, lk.Operational)
		assert.False(t, lk.DoorOpen)
	}
	assert.Len(t, names, 16, "names are unique")
	assert.Equal(t, gateway.Locker{
		LockerID: 101, Name: "A01", BankID: 1, LockerTypeID: 1, Operational: true, Available: true,
	}, lockers[0])

	cfg := decode[gateway.LockerConfig](t, call(t, gw, http.MethodGet, "/lockers/config", nil))
	assert.Equal(t, "GW-0001", cfg.GatewayID)
	require.Len(t, cfg.Banks, 2)
	assert.Equal(t, gateway.LockController{
		ID: "CTL-2", Kind: "simulated", Address: "sim://ctl-2", Online: true, LockerCount: 8, FirmwareVersion: simctl.DefaultFirmwareVersion,
	}, cfg.Banks[1].Controller)
	assert.Equal(t, gateway.BankLocker{LockerID: 109, Name: "B01", Channel: 1, LockerTypeID: 1}, cfg.Banks[1].Lockers[0])

	for _, path := range []string{"/lockers/9999", "/lockers/abc", "/lockers/-1", "/lockers/1e3"} {
		requireError(t, call(t, gw, http.MethodGet, path, nil), http.StatusNotFound, gateway.CodeLockerNotFound)
		requireError(t, call(t, gw, http.MethodPost, path+"/open", nil), http.StatusNotFound, gateway.CodeLockerNotFound)
		requireError(t, call(t, gw, http.MethodPatch, path, map[string]any{"outOfService": true}), http.StatusNotFound, gateway.CodeLockerNotFound)
	}
}

func TestDoorStateFollowsTheSensors(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	op := decode[gateway.LockerOperationResponse](t, call(t, gw, http.MethodPost, "/lockers/103/open", nil))
	assert.Equal(t, gateway.LockerOperationResponse{Success: true, LockerID: 103, DoorOpen: true, Message: "locker opened"}, op)
	assert.True(t, decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/103", nil)).DoorOpen)

	require.True(t, gw.Sim.CloseDoor(103, false))
	assert.False(t, decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/103", nil)).DoorOpen)
	assert.Equal(t, 1, gw.Sim.Opens(103))
}

func TestPatchLocker(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})

	r := call(t, gw, http.MethodPatch, "/lockers/203", map[string]any{"outOfService": true, "reasonCode": "CLEANING", "reason": "spill"})
	op := decode[gateway.LockerOperationResponse](t, r)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	assert.True(t, op.Success)
	assert.Equal(t, 203, op.LockerID)

	// A free-text reason may span lines; its code may not.
	r = call(t, gw, http.MethodPatch, "/lockers/204", map[string]any{"outOfService": true, "reasonCode": "DAMAGE", "reason": "hinge bent\n\tsee photo"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	lk := decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/203", nil))
	assert.True(t, lk.OutOfService)
	assert.False(t, lk.Available)
	require.NotNil(t, lk.ReasonCode)
	assert.Equal(t, "CLEANING", *lk.ReasonCode)

	// A transaction on an out-of-service locker cannot open it; a maintenance
	// open can.
	setOutOfService(t, gw, 203, false)
	tx := createTransaction(t, gw, map[string]any{"transactionId": "t1", "lockerTypeId": 1})
	setOutOfService(t, gw, tx.LockerID, true)
	e := requireError(t, call(t, gw, http.MethodPost, "/transactions/t1/open", nil), http.StatusConflict, gateway.CodeLockerOutOfService)
	assert.EqualValues(t, tx.LockerID, e.Details["lockerId"])
	assert.Equal(t, 0, gw.Sim.Opens(tx.LockerID))
	require.Equal(t, http.StatusOK, call(t, gw, http.MethodPost, "/lockers/"+itoa(tx.LockerID)+"/open", nil).status)
	assert.Equal(t, 1, gw.Sim.Opens(tx.LockerID))

	// Returning to service clears the reason.
	setOutOfService(t, gw, tx.LockerID, false)
	lk = decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/"+itoa(tx.LockerID), nil))
	assert.False(t, lk.OutOfService)
	assert.Nil(t, lk.ReasonCode)
	assert.Nil(t, lk.Reason)

	checkBadBodies(t, gw, http.MethodPatch, "/lockers/201", []badBody{
		{"no body", nil, 400, gateway.CodeInvalidJSON, ""},
		{"missing flag", []byte(`{"reason": "x"}`), 422, gateway.CodeValidation, "outOfService"},
		{"string flag", []byte(`{"outOfService": "true"}`), 422, gateway.CodeValidation, "outOfService"},
		{"numeric reason", []byte(`{"outOfService": true, "reason": 5}`), 422, gateway.CodeValidation, "reason"},
		{"long reason", []byte(`{"outOfService": true, "reason": "` + strings.Repeat("r", 501) + `"}`), 422, gateway.CodeValidation, "reason"},
		{"long code", []byte(`{"outOfService": true, "reasonCode": "` + strings.Repeat("c", 65) + `"}`), 422, gateway.CodeValidation, "reasonCode"},
		{"malformed", []byte(`{"outOfService": tru}`), 400, gateway.CodeInvalidJSON, ""},
		{"NUL in code", []byte(`{"outOfService": true, "reasonCode": "CLEANING\u0000"}`), 422, gateway.CodeValidation, "reasonCode"},
		{"line break in code", []byte(`{"outOfService": true, "reasonCode": "CLEANING\n"}`), 422, gateway.CodeValidation, "reasonCode"},
		{"NUL in reason", []byte(`{"outOfService": true, "reason": "spill\u0000"}`), 422, gateway.CodeValidation, "reason"},
		{"escape in reason", []byte(`{"outOfService": true, "reason": "\u001b[2J"}`), 422, gateway.CodeValidation, "reason"},
	})
}

func TestOpenAll(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	r := call(t, gw, http.MethodPost, "/lockers/open-all", nil)
	require.Equal(t, http.StatusMultiStatus, r.status, "body: %s", r.body)
	res := decode[gateway.OpenAllLockersResponse](t, r)
	assert.Equal(t, 16, res.SuccessCount)
	assert.Equal(t, 0, res.FailureCount)
	require.Len(t, res.Results, 16)
	assert.Equal(t, gateway.OperationResult{LockerID: 101, Status: 200, Success: true, Message: "locker opened"}, res.Results[0])
	for _, id := range []int{101, 108, 109, 116} {
		assert.Equal(t, 1, gw.Sim.Opens(id))
	}

	// One dead controller: its bank fails with 503 after one open policy, the
	// other bank opens.
	gw.SetFaults(t, simctl.Faults{Mode: simctl.ModeControllerUnreachable, ControllerID: "CTL-2"})
	before := gw.Sim.Controller("CTL-2").Attempts()
	res = decode[gateway.OpenAllLockersResponse](t, call(t, gw, http.MethodPost, "/lockers/open-all", nil))
	assert.Equal(t, 8, res.SuccessCount)
	assert.Equal(t, 8, res.FailureCount)
	for _, rr := range res.Results {
		if rr.LockerID >= 109 {
			assert.Equal(t, http.StatusServiceUnavailable, rr.Status)
			assert.Equal(t, gateway.CodeControllerUnavailable, rr.Error)
			assert.False(t, rr.Success)
		} else {
			assert.True(t, rr.Success, "locker %d", rr.LockerID)
		}
	}
	assert.Equal(t, 3, gw.Sim.Controller("CTL-2").Attempts()-before, "one open policy for the whole bank")
	assert.Equal(t, 1, gw.Sim.Opens(109), "no actuation on the dead bank")
	assert.Equal(t, 2, gw.Sim.Opens(101))
}

func TestLockerAndBankTypes(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	types := decode[[]gateway.LockerTypeSummary](t, call(t, gw, http.MethodGet, "/locker-types", nil))
	assert.Equal(t, []gateway.LockerTypeSummary{{ID: 1, Name: "small"}, {ID: 2, Name: "medium"}, {ID: 3, Name: "large"}}, types)

	lt := decode[gateway.LockerType](t, call(t, gw, http.MethodGet, "/locker-types/2", nil))
	assert.Equal(t, 2, lt.ID)
	assert.Equal(t, "medium", lt.Name)
	assert.Equal(t, 7, lt.LockerCount, "3 in bank 1, 4 in bank 2")
	assert.Positive(t, lt.WidthMm)
	require.NotNil(t, lt.Description)

	banks := decode[[]gateway.BankType](t, call(t, gw, http.MethodGet, "/bank-types", nil))
	assert.Equal(t, []gateway.BankType{{ID: 1, Name: "Parcel column S/M/L", LockerCount: 8}, {ID: 2, Name: "Parcel column S/M", LockerCount: 8}}, banks)

	bt := decode[gateway.BankTypeWithAssociations](t, call(t, gw, http.MethodGet, "/bank-types/2", nil))
	assert.Equal(t, gateway.BankTypeWithAssociations{
		ID: 2, Name: "Parcel column S/M", LockerCount: 8,
		Associations: []gateway.BankTypeAssociation{{LockerTypeID: 1, Count: 4}, {LockerTypeID: 2, Count: 4}},
	}, bt)

	for _, path := range []string{"/locker-types/99", "/locker-types/small", "/locker-types/0"} {
		requireError(t, call(t, gw, http.MethodGet, path, nil), http.StatusNotFound, gateway.CodeLockerTypeNotFound)
	}
	for _, path := range []string{"/bank-types/99", "/bank-types/x"} {
		requireError(t, call(t, gw, http.MethodGet, path, nil), http.StatusNotFound, gateway.CodeBankTypeNotFound)
	}
}
