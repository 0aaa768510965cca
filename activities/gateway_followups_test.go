package activities

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

func completed(status int, body string) gatewayreq.Outcome {
	return gatewayreq.Outcome{Status: gatewayreq.StateCompleted, HTTPStatus: status, Body: []byte(body)}
}

func failed(state string, status int) gatewayreq.Outcome {
	return gatewayreq.Outcome{Status: state, HTTPStatus: status}
}

// What an access-code open's outcome does to its code (DESIGN §5).
func TestCodeOpenEffect(t *testing.T) {
	t.Parallel()
	opened := completed(200, `{"success":true,"lockerId":7,"doorOpen":true,"message":"locker opened"}`)
	notOpened := completed(200, `{"success":false,"lockerId":7,"doorOpen":false,"message":"the door did not open"}`)
	for _, tc := range []struct {
		name      string
		outcome   gatewayreq.Outcome
		singleUse bool
		effect    store.CodeOpenEffect
		usesUp    bool
	}{
		{"the door opened", opened, false, store.CodeOpenEffect{Status: "opened", Used: true}, false},
		{"a single-use code opened its door", opened, true, store.CodeOpenEffect{Status: "opened", Used: true}, true},
		{"a 2xx without a body opened it", completed(204, ""), false, store.CodeOpenEffect{Status: "opened", Used: true}, false},
		{"the gateway tried but the door did not open", notOpened, false, store.CodeOpenEffect{Status: "failed"}, false},
		{"a single-use code is spent on an open the gateway carried out", notOpened, true, store.CodeOpenEffect{Status: "failed"}, true},
		{"the gateway refused the open (4xx)", completed(404, `{"error":"TRANSACTION_NOT_FOUND"}`), true, store.CodeOpenEffect{Status: "failed"}, false},
		{"never delivered: a single-use code is given back", failed(gatewayreq.StateDispatchFailed, 503), true,
			store.CodeOpenEffect{Status: "failed", Restore: true}, false},
		{"never delivered: a reusable code has nothing to give back", failed(gatewayreq.StateDispatchFailed, 503), false,
			store.CodeOpenEffect{Status: "failed"}, false},
		{"no answer: the door may have opened, the code stays spent, the outcome unknown", failed(gatewayreq.StateGatewayUnresponsive, 504), true,
			store.CodeOpenEffect{Status: "unknown"}, false},
		{"rejected: the code stays spent", failed(gatewayreq.StateRejected, 502), true, store.CodeOpenEffect{Status: "failed"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.effect, codeOpenEffect(tc.outcome, tc.singleUse))
			assert.Equal(t, tc.usesUp, usesUpCode(tc.outcome, tc.singleUse))
		})
	}
}

func TestCloseStatus(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "closed", closeStatus(completed(200, `{"lockerId":7,"doorOpen":false}`)))
	assert.Equal(t, "door_open", closeStatus(completed(200, `{"lockerId":7,"doorOpen":true}`)))
	assert.Equal(t, "failed", closeStatus(completed(404, `{"error":"LOCKER_NOT_FOUND"}`)))
	assert.Equal(t, "failed", closeStatus(failed(gatewayreq.StateGatewayUnresponsive, 504)))
}

func TestCreatedTransaction(t *testing.T) {
	t.Parallel()
	tr, ok := createdTransaction(completed(201, `{"transactionId":"order-17","lockerId":12,"createdAt":"2026-01-01T00:00:00Z"}`))
	require.True(t, ok)
	assert.Equal(t, store.GatewayTransaction{Type: "gateway_transaction", Status: "created", LockerID: 12, OrderRef: "order-17"}, tr)
	_, ok = createdTransaction(completed(409, `{"error":"TRANSACTION_EXISTS"}`))
	assert.False(t, ok, "only a 201 made a transaction")
	_, ok = createdTransaction(completed(201, `not json`))
	assert.False(t, ok)
}

// followUpStore records what the follow-ups ask of Postgres.
type followUpStore struct {
	AccessCodeStore
	code     store.AccessCode
	settled  []store.CodeOpenEffect
	settledC []uuid.UUID
	rows     []store.GatewayTransaction
}

func (f *followUpStore) AccessCode(_ context.Context, _ int64, id uuid.UUID) (store.AccessCode, error) {
	if id != f.code.ID {
		return store.AccessCode{}, store.ErrNotFound
	}
	return f.code, nil
}

func (f *followUpStore) SettleCodeOpen(_ context.Context, _ store.GatewayRequest, codeID uuid.UUID, e store.CodeOpenEffect) error {
	f.settled, f.settledC = append(f.settled, e), append(f.settledC, codeID)
	return nil
}

func (f *followUpStore) RecordGatewayTransaction(_ context.Context, _ store.GatewayRequest, t store.GatewayTransaction) error {
	f.rows = append(f.rows, t)
	return nil
}

// The follow-ups find what a request concerns in its subject, never in its path.
func TestFollowUpReadsTheSubject(t *testing.T) {
	t.Parallel()
	now := time.Now()
	code := store.AccessCode{ID: uuid.New(), SingleUse: true, LockerName: "A3"}
	f := &followUpStore{code: code}
	a := &Activities{AccessCodes: f}
	req := func(kind, subject string, o gatewayreq.Outcome) store.GatewayRequest {
		return store.GatewayRequest{NewGatewayRequest: store.NewGatewayRequest{ID: uuid.New(), Kind: kind, GatewayPath: "/somewhere/else",
			Subject: subject}, Status: o.Status, CompletedAt: &now, Outcome: o}
	}

	used, err := a.followUp(context.Background(), req(gatewayreq.KindAccessCodeOpen, code.ID.String(), completed(200, `{"success":true,"doorOpen":true}`)))
	require.NoError(t, err)
	assert.Equal(t, code.ID.String(), used, "a single-use code that opened releases its hold")
	assert.Equal(t, []uuid.UUID{code.ID}, f.settledC)
	assert.Equal(t, []store.CodeOpenEffect{{Status: "opened", Used: true}}, f.settled)

	used, err = a.followUp(context.Background(), req(gatewayreq.KindAccessCodeClose, "12", completed(200, `{"doorOpen":true}`)))
	require.NoError(t, err)
	assert.Empty(t, used)
	assert.Equal(t, []store.GatewayTransaction{{Type: "close", Status: "door_open", LockerID: 12}}, f.rows)

	_, err = a.followUp(context.Background(), req(gatewayreq.KindAccessCodeOpen, "", completed(200, "")))
	assert.Error(t, err, "an open without a subject is not guessed from its path")

	used, err = a.followUp(context.Background(), req(gatewayreq.KindOpenLocker, "", completed(200, "")))
	require.NoError(t, err)
	assert.Empty(t, used, "a cloud API open has no follow-up")
	assert.Len(t, f.rows, 1)
}
