package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// A closed reservation moved out of the live table into its history (docs/data-lifecycle.md)
// answers every call exactly as before the move: its GET, a repeated cancel (it succeeds
// again), a cancel of an expired one (409), another organization's GET (404).
func TestClosedReservationAnswersTheSameAfterItMoved(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	tok := demoToken(t, e)
	rival := otherOrgToken(t, e, e.NewOtherOrg(t))

	cancelled := reserve(t, e, tok, towerUnion1, lockerID(t, e, towerUnion1, 0), 300)
	require.Equal(t, http.StatusNoContent, cancelReservation(t, e, tok, cancelled).Status)
	expired := reserve(t, e, tok, towerUnion1, lockerID(t, e, towerUnion1, 1), 1)
	require.Eventually(t, func() bool { return getReservation(t, e, tok, expired.ID).Status == "expired" }, 30*time.Second, 50*time.Millisecond)
	// Both closed two days ago, past LOCKERNET_HISTORY_MOVE_AFTER; their workflows have ended.
	workflowResult(t, e, cancelled.ID)
	workflowResult(t, e, expired.ID)
	_, err := e.Store.Pool().Exec(ctx, `
		UPDATE reservations SET created_at = created_at - interval '2 days', expires_at = expires_at - interval '2 days',
		       ended_at = ended_at - interval '2 days'
		WHERE id = ANY($1::uuid[])`, []string{cancelled.ID, expired.ID})
	require.NoError(t, err)

	type answer struct {
		Status int
		Body   string
	}
	calls := map[string]func() answer{}
	for _, res := range []reservation{cancelled, expired} {
		calls["GET "+res.ID] = func() answer {
			r := e.Do(http.MethodGet, "/api/v1/reservations/"+res.ID, tok, nil)
			return answer{r.Status, string(r.Body)}
		}
		calls["rival GET "+res.ID] = func() answer {
			r := e.Do(http.MethodGet, "/api/v1/reservations/"+res.ID, rival, nil)
			return answer{r.Status, ""}
		}
		calls["DELETE "+res.ID] = func() answer {
			r := cancelReservation(t, e, tok, res)
			return answer{r.Status, string(r.Body)}
		}
	}
	before := map[string]answer{}
	for name, call := range calls {
		before[name] = call()
	}
	assert.Equal(t, http.StatusOK, before["GET "+cancelled.ID].Status)
	assert.Less(t, before["DELETE "+cancelled.ID].Status, 300, "a repeated cancel succeeds")
	assert.Equal(t, http.StatusConflict, before["DELETE "+expired.ID].Status)
	assert.Equal(t, http.StatusNotFound, before["rival GET "+expired.ID].Status)

	n, err := e.Store.MoveClosedReservations(ctx, time.Hour, 1000)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	var live int
	require.NoError(t, e.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM reservations WHERE id = ANY($1::uuid[])`,
		[]string{cancelled.ID, expired.ID}).Scan(&live))
	require.Zero(t, live, "both moved")
	for name, call := range calls {
		got := call()
		assert.Equal(t, before[name].Status, got.Status, name)
		switch {
		case before[name].Body == "":
		case got.Status == http.StatusOK:
			assert.JSONEq(t, before[name].Body, got.Body, name)
		case got.Status >= 400:
			assert.Equal(t, problemDetail(t, before[name].Body), problemDetail(t, got.Body), name)
		}
	}
}

func problemDetail(t *testing.T, body string) any {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &p), "problem: %s", body)
	return p["detail"]
}
