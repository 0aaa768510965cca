package gateway_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

func TestTransactionLifecycle(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	r := call(t, gw, http.MethodPost, "/transactions", map[string]any{"transactionId": "order-1", "lockerTypeId": 2})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	assert.Equal(t, "/transactions/order-1", r.header.Get("Location"))
	tx := decode[gateway.TransactionResponse](t, r)
	assert.Equal(t, "order-1", tx.TransactionID)
	assert.Regexp(t, timestampPattern, tx.CreatedAt)
	assert.Equal(t, 104, tx.LockerID, "the first medium, non-low locker")

	got := decode[gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions/order-1", nil))
	assert.Equal(t, tx, got)

	list := decode[[]gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions", nil))
	assert.Equal(t, []gateway.TransactionResponse{tx}, list)

	lk := decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/104", nil))
	require.NotNil(t, lk.TransactionID)
	assert.Equal(t, "order-1", *lk.TransactionID)
	assert.False(t, lk.Available)

	// Same id again: 409 with the existing transaction, no second locker.
	r = call(t, gw, http.MethodPost, "/transactions", map[string]any{"transactionId": "order-1", "lockerTypeId": 1})
	e := requireError(t, r, http.StatusConflict, gateway.CodeTransactionExists)
	assert.EqualValues(t, 104, e.Details["lockerId"])
	conflict := decode[gateway.TransactionResponse](t, r)
	assert.Equal(t, tx, conflict, "the 409 body carries the existing transaction")

	// Open by transaction actuates the door once.
	op := decode[gateway.LockerOperationResponse](t, call(t, gw, http.MethodPost, "/transactions/order-1/open", nil))
	assert.Equal(t, gateway.LockerOperationResponse{Success: true, LockerID: 104, DoorOpen: true, Message: "locker opened"}, op)
	assert.Equal(t, 1, gw.Sim.Opens(104))

	// Release frees the locker without opening it.
	gw.Sim.CloseDoor(104, true)
	r = call(t, gw, http.MethodDelete, "/transactions/order-1", nil)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	assert.Empty(t, r.body)
	assert.Equal(t, 1, gw.Sim.Opens(104), "release does not open the door")
	lk = decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/104", nil))
	assert.Nil(t, lk.TransactionID)
	assert.True(t, lk.Available)

	requireError(t, call(t, gw, http.MethodGet, "/transactions/order-1", nil), http.StatusNotFound, gateway.CodeTransactionNotFound)
	requireError(t, call(t, gw, http.MethodDelete, "/transactions/order-1", nil), http.StatusNotFound, gateway.CodeTransactionNotFound)
	requireError(t, call(t, gw, http.MethodPost, "/transactions/order-1/open", nil), http.StatusNotFound, gateway.CodeTransactionNotFound)
	assert.Empty(t, decode[[]gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions", nil)))

	// A released id stays taken: a re-sent create must never assign again.
	r = call(t, gw, http.MethodPost, "/transactions", map[string]any{"transactionId": "order-1"})
	e = requireError(t, r, http.StatusConflict, gateway.CodeTransactionExists)
	assert.Equal(t, true, e.Details["released"])
}

func TestCreateTransactionInput(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	good := []struct {
		name string
		body any
		want func(t *testing.T, tx gateway.TransactionResponse)
	}{
		{name: "empty body generates an id", body: nil, want: func(t *testing.T, tx gateway.TransactionResponse) {
			assert.Len(t, tx.TransactionID, 36)
		}},
		{name: "numeric transaction id", body: []byte(`{"transactionId": 4711}`), want: func(t *testing.T, tx gateway.TransactionResponse) {
			assert.Equal(t, "4711", tx.TransactionID)
		}},
		{name: "numeric-string type id", body: []byte(`{"lockerTypeId": "3"}`), want: func(t *testing.T, tx gateway.TransactionResponse) {
			assert.Contains(t, []int{107, 108}, tx.LockerID)
		}},
		{name: "null fields are absent", body: []byte(`{"transactionId": null, "lockerTypeId": null, "bankTypeId": null}`), want: func(t *testing.T, tx gateway.TransactionResponse) {
			assert.NotEmpty(t, tx.TransactionID)
		}},
		{name: "unknown fields are ignored", body: []byte(`{"colour": "blue"}`), want: func(t *testing.T, tx gateway.TransactionResponse) {
			assert.NotEmpty(t, tx.TransactionID)
		}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			tc.want(t, createTransaction(t, gw, tc.body))
		})
	}

	checkBadBodies(t, gw, http.MethodPost, "/transactions", []badBody{
		{"malformed JSON", []byte(`{"lockerTypeId": `), 400, gateway.CodeInvalidJSON, ""},
		{"trailing garbage", []byte(`{} {}`), 400, gateway.CodeInvalidJSON, ""},
		{"array body", []byte(`[1, 2]`), 422, gateway.CodeValidation, ""},
		{"string body", []byte(`"hello"`), 422, gateway.CodeValidation, ""},
		{"boolean type id", []byte(`{"lockerTypeId": true}`), 422, gateway.CodeValidation, "lockerTypeId"},
		{"fractional type id", []byte(`{"lockerTypeId": 1.5}`), 422, gateway.CodeValidation, "lockerTypeId"},
		{"negative type id", []byte(`{"lockerTypeId": -1}`), 422, gateway.CodeValidation, "lockerTypeId"},
		{"unknown type id", []byte(`{"lockerTypeId": 99}`), 422, gateway.CodeValidation, "lockerTypeId"},
		{"unknown bank type", []byte(`{"bankTypeId": 42}`), 422, gateway.CodeValidation, "bankTypeId"},
		{"object bank type", []byte(`{"bankTypeId": {}}`), 422, gateway.CodeValidation, "bankTypeId"},
		{"string low flag", []byte(`{"requireLowLocker": "yes"}`), 422, gateway.CodeValidation, "requireLowLocker"},
		{"NUL in type id", []byte(`{"lockerTypeId": "1\u0000"}`), 422, gateway.CodeValidation, "lockerTypeId"},
		{"NUL in transaction id", []byte(`{"transactionId": "t-1\u0000"}`), 422, gateway.CodeValidation, "transactionId"},
		{"slash in id", []byte(`{"transactionId": "a/b"}`), 422, gateway.CodeValidation, "transactionId"},
		{"empty id", []byte(`{"transactionId": ""}`), 422, gateway.CodeValidation, "transactionId"},
		{"long id", []byte(`{"transactionId": "` + strings.Repeat("x", 129) + `"}`), 422, gateway.CodeValidation, "transactionId"},
		{"boolean id", []byte(`{"transactionId": false}`), 422, gateway.CodeValidation, "transactionId"},
	})
}

func TestAssignmentPreferences(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	// Low lockers of type 2 (medium): 106 (bank 1, channel 6), 115, 116 (bank 2).
	tx := createTransaction(t, gw, map[string]any{"lockerTypeId": 2, "requireLowLocker": true})
	assert.Equal(t, 106, tx.LockerID)

	// Without the requirement, low lockers are kept for last.
	var got []int
	for i := 0; i < 4; i++ {
		got = append(got, createTransaction(t, gw, map[string]any{"lockerTypeId": 2}).LockerID)
	}
	assert.Equal(t, []int{104, 105, 113, 114}, got)
	assert.Equal(t, 115, createTransaction(t, gw, map[string]any{"lockerTypeId": 2}).LockerID)

	// Bank type 2 holds no large lockers.
	e := requireError(t, call(t, gw, http.MethodPost, "/transactions", map[string]any{"lockerTypeId": 3, "bankTypeId": 2}),
		http.StatusNotFound, gateway.CodeNoAvailableLockers)
	assert.EqualValues(t, 3, e.Details["lockerTypeId"])

	tx = createTransaction(t, gw, map[string]any{"bankTypeId": 2, "lockerTypeId": 1})
	assert.Equal(t, 109, tx.LockerID)

	// Out-of-service lockers are never assigned.
	setOutOfService(t, gw, 116, true)
	requireError(t, call(t, gw, http.MethodPost, "/transactions", map[string]any{"lockerTypeId": 2}),
		http.StatusNotFound, gateway.CodeNoAvailableLockers)
	setOutOfService(t, gw, 116, false)
	assert.Equal(t, 116, createTransaction(t, gw, map[string]any{"lockerTypeId": 2}).LockerID)
}

// TestConcurrentCreatesForLastLocker races 20 creates for one free locker.
func TestConcurrentCreatesForLastLocker(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})
	for id := 201; id <= 207; id++ {
		setOutOfService(t, gw, id, true)
	}

	const n = 20
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, data, err := gw.Do(t.Context(), http.MethodPost, "/transactions", map[string]any{})
			if err == nil {
				replies[i] = reply{status: resp.StatusCode, header: resp.Header, body: data}
			}
		})
	}
	wg.Wait()

	won := 0
	for _, r := range replies {
		switch r.status {
		case http.StatusCreated:
			won++
			assert.Equal(t, 208, decode[gateway.TransactionResponse](t, r).LockerID)
		case http.StatusNotFound:
			requireError(t, r, http.StatusNotFound, gateway.CodeNoAvailableLockers)
		case http.StatusServiceUnavailable:
			requireError(t, r, http.StatusServiceUnavailable, gateway.CodeLockerAssignmentConflict)
		default:
			t.Errorf("unexpected answer %d: %s", r.status, r.body)
		}
	}
	assert.Equal(t, 1, won, "exactly one create wins the last locker")
	list := decode[[]gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions", nil))
	assert.Len(t, list, 1)
}

// TestConcurrentSameTransactionID sends one transactionId 20 times at once.
func TestConcurrentSameTransactionID(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	const n = 20
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, data, err := gw.Do(t.Context(), http.MethodPost, "/transactions", map[string]any{"transactionId": "same"})
			if err == nil {
				replies[i] = reply{status: resp.StatusCode, header: resp.Header, body: data}
			}
		})
	}
	wg.Wait()

	created, lockers := 0, map[int]bool{}
	for _, r := range replies {
		switch r.status {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			requireError(t, r, http.StatusConflict, gateway.CodeTransactionExists)
		default:
			t.Errorf("unexpected answer %d: %s", r.status, r.body)
			continue
		}
		lockers[decode[gateway.TransactionResponse](t, r).LockerID] = true
	}
	assert.Equal(t, 1, created)
	assert.Len(t, lockers, 1, "every answer names the same locker")
	list := decode[[]gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions", nil))
	assert.Len(t, list, 1)
}

func TestRestartKeepsState(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{})

	tx := createTransaction(t, gw, map[string]any{"transactionId": "survivor", "lockerTypeId": 3})
	released := createTransaction(t, gw, map[string]any{"transactionId": "gone"})
	require.Equal(t, http.StatusNoContent, call(t, gw, http.MethodDelete, "/transactions/gone", nil).status)
	r := call(t, gw, http.MethodPatch, "/lockers/110", map[string]any{"outOfService": true, "reasonCode": "DAMAGED", "reason": "hinge broken"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	gw.Restart(t)

	got := decode[gateway.TransactionResponse](t, call(t, gw, http.MethodGet, "/transactions/survivor", nil))
	assert.Equal(t, tx, got)
	requireError(t, call(t, gw, http.MethodGet, "/transactions/gone", nil), http.StatusNotFound, gateway.CodeTransactionNotFound)
	requireError(t, call(t, gw, http.MethodPost, "/transactions", map[string]any{"transactionId": "gone"}), http.StatusConflict, gateway.CodeTransactionExists)

	lk := decode[gateway.Locker](t, call(t, gw, http.MethodGet, "/lockers/110", nil))
	assert.True(t, lk.OutOfService)
	require.NotNil(t, lk.ReasonCode)
	assert.Equal(t, "DAMAGED", *lk.ReasonCode)
	require.NotNil(t, lk.Reason)
	assert.Equal(t, "hinge broken", *lk.Reason)

	// The restarted gateway still never hands out a held locker.
	next := createTransaction(t, gw, map[string]any{"lockerTypeId": 3})
	assert.NotEqual(t, tx.LockerID, next.LockerID)
	assert.NotEqual(t, released.TransactionID, next.TransactionID)

	logs := decode[[]gateway.LogEntry](t, call(t, gw, http.MethodGet, "/system/logs?limit=1000", nil))
	started := 0
	for _, e := range logs {
		if e.Message == "gateway started" {
			started++
		}
	}
	assert.Equal(t, 2, started, "the event log survives the restart too")
}
