package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/workflows/contract"
)

// workflowResult waits for a reservation's workflow to close and returns its result.
func workflowResult(t *testing.T, e *testenv.Env, reservationID string) contract.ReservationState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var st contract.ReservationState
	wfID := contract.ReservationWorkflowID(reservationID)
	// The outbox starts the workflow right after the request; wait until it exists.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := e.Temporal.DescribeWorkflowExecution(ctx, wfID, "")
		assert.NoError(c, err)
	}, 30*time.Second, 50*time.Millisecond, "workflow %s never started", wfID)
	require.NoError(t, e.Temporal.GetWorkflow(ctx, wfID, "").Get(ctx, &st))
	return st
}

// searchAttributes returns a workflow's keyword search attributes.
func searchAttributes(t *testing.T, e *testenv.Env, wfID string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	desc, err := e.Temporal.DescribeWorkflowExecution(ctx, wfID, "")
	require.NoError(t, err)
	out := map[string]string{}
	for k, p := range desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields() {
		var v any
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &v), "attribute %s", k)
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func TestCreateReservation(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	id := lockerID(t, e, towerUnion1, mediumLow)
	locID := locationID(t, e, towerUnion1)

	before := time.Now().UTC()
	r := e.Do(http.MethodPost, reservePath(towerUnion1, id), tok, map[string]any{"duration": 300})
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
	body := r.Map(t)
	assert.Equal(t, sorted("id", "lockerId", "towerId", "status", "createdAt", "expiresAt", "duration"), keys(body))

	var res reservation
	r.JSON(t, &res)
	assert.Equal(t, "active", res.Status)
	assert.Equal(t, id, res.LockerID)
	assert.Equal(t, towerUnion1, res.TowerID)
	assert.Equal(t, 300, res.Duration)
	assert.Equal(t, "/api/v1/reservations/"+res.ID, r.Header.Get("Location"))
	require.Regexp(t, timestampRE, res.CreatedAt)
	require.Regexp(t, timestampRE, res.ExpiresAt)
	created, err := time.Parse(time.RFC3339Nano, res.CreatedAt)
	require.NoError(t, err)
	expires, err := time.Parse(time.RFC3339Nano, res.ExpiresAt)
	require.NoError(t, err)
	assert.Equal(t, 300*time.Second, expires.Sub(created).Round(time.Millisecond))
	assert.WithinDuration(t, before, created, time.Minute, "createdAt is the time of the request")

	t.Run("the locker reads reserved in the tower and location lists", func(t *testing.T) {
		want := lockerStatus{ID: 2, Name: "reserved"}
		assert.Equal(t, want, towerLocker(t, e, tok, towerUnion1, id).Status)
		assert.Equal(t, want, locationLocker(t, e, tok, locID, id).Status)
	})

	t.Run("GET returns it", func(t *testing.T) {
		got := e.Do(http.MethodGet, "/api/v1/reservations/"+res.ID, tok, nil)
		require.Equal(t, http.StatusOK, got.Status, "body: %s", got.Body)
		assert.JSONEq(t, string(r.Body), string(got.Body))
	})

	t.Run("GET with upper-case id finds it", func(t *testing.T) {
		got := e.Do(http.MethodGet, "/api/v1/reservations/"+strings.ToUpper(res.ID), tok, nil)
		require.Equal(t, http.StatusOK, got.Status, "body: %s", got.Body)
		assert.Equal(t, res.ID, got.Map(t)["id"])
	})

	t.Run("the workflow runs with its search attributes", func(t *testing.T) {
		wfID := "reservation/" + res.ID
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, err := e.Temporal.DescribeWorkflowExecution(context.Background(), wfID, "")
			assert.NoError(c, err)
		}, 30*time.Second, 50*time.Millisecond)
		attrs := searchAttributes(t, e, wfID)
		assert.Equal(t, strconv.FormatInt(id, 10), attrs["LockerId"])
		assert.Equal(t, towerUnion1, attrs["TowerId"])
		assert.Equal(t, strconv.FormatInt(e.Creds.OrganizationID, 10), attrs["OrganizationId"])
		assert.Equal(t, strconv.FormatInt(locID, 10), attrs["LocationId"])

		desc, err := e.Temporal.DescribeWorkflowExecution(context.Background(), wfID, "")
		require.NoError(t, err)
		assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, desc.GetWorkflowExecutionInfo().GetStatus())
	})

	t.Run("visibility finds it by LockerId", func(t *testing.T) {
		query := fmt.Sprintf(`LockerId = "%d"`, id)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			resp, err := e.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: e.Namespace, Query: query,
			})
			if !assert.NoError(c, err) {
				return
			}
			ids := []string{}
			for _, ex := range resp.GetExecutions() {
				ids = append(ids, ex.GetExecution().GetWorkflowId())
			}
			assert.Equal(c, []string{"reservation/" + res.ID}, ids)
		}, 30*time.Second, 100*time.Millisecond)
	})

	t.Run("a body of exactly 64 KiB is accepted", func(t *testing.T) {
		body := `{"duration": 60}`
		body += strings.Repeat(" ", 64<<10-len(body))
		require.Len(t, body, 64<<10)
		r := e.Do(http.MethodPost, reservePath(towerUnion2, lockerID(t, e, towerUnion2, mediumHigh)), tok, body)
		assert.Equal(t, http.StatusCreated, r.Status, "body: %.300s", r.Body)
	})

	t.Run("the maximum duration is accepted", func(t *testing.T) {
		long := reserve(t, e, tok, towerUnion1, lockerID(t, e, towerUnion1, smallHigh), 86400)
		assert.Equal(t, 86400, long.Duration)
	})
}

func TestReservationBadInput(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	id := lockerID(t, e, towerUnion1, smallHigh)
	otherTowerLocker := lockerID(t, e, towerSantaMon, smallHigh)
	path := reservePath(towerUnion1, id)
	big := `{"duration": 30, "pad": "` + strings.Repeat("x", 64<<10) + `"}`

	cases := []struct {
		name   string
		path   string
		body   any
		status int
	}{
		{"duration 0", path, map[string]any{"duration": 0}, http.StatusUnprocessableEntity},
		{"duration -1", path, map[string]any{"duration": -1}, http.StatusUnprocessableEntity},
		{"duration 86401", path, map[string]any{"duration": 86401}, http.StatusUnprocessableEntity},
		{"duration 1.5", path, map[string]any{"duration": 1.5}, http.StatusUnprocessableEntity},
		{"duration a string", path, map[string]any{"duration": "30"}, http.StatusUnprocessableEntity},
		{"duration null", path, `{"duration": null}`, http.StatusUnprocessableEntity},
		{"duration missing", path, map[string]any{}, http.StatusUnprocessableEntity},
		{"duration huge", path, `{"duration": 1e300}`, http.StatusUnprocessableEntity},
		{"duration beyond float64", path, `{"duration": 1e999}`, http.StatusBadRequest},
		{"body not JSON", path, "duration=30", http.StatusBadRequest},
		{"body a JSON array", path, `[{"duration": 30}]`, http.StatusUnprocessableEntity},
		{"body empty", path, "", http.StatusBadRequest},
		{"body over 64 KiB", path, big, http.StatusRequestEntityTooLarge},
		{"valid JSON one byte over 64 KiB", path, `{"duration": 30}` + strings.Repeat(" ", 64<<10-len(`{"duration": 30}`)+1), http.StatusRequestEntityTooLarge},
		{"unknown locker", reservePath(towerUnion1, 999999), map[string]any{"duration": 30}, http.StatusNotFound},
		{"locker id 0", reservePath(towerUnion1, 0), map[string]any{"duration": 30}, http.StatusNotFound},
		{"locker of another tower", reservePath(towerUnion1, otherTowerLocker), map[string]any{"duration": 30}, http.StatusNotFound},
		{"unknown tower", reservePath("0100000000000099", id), map[string]any{"duration": 30}, http.StatusNotFound},
		{"non-numeric locker id", fmt.Sprintf("/api/v1/towers/%s/lockers/abc/reservations", towerUnion1), map[string]any{"duration": 30}, http.StatusUnprocessableEntity},
		{"locker id beyond int64", fmt.Sprintf("/api/v1/towers/%s/lockers/99999999999999999999/reservations", towerUnion1), map[string]any{"duration": 30}, http.StatusUnprocessableEntity},
		{"malformed tower id", fmt.Sprintf("/api/v1/towers/xyz/lockers/%d/reservations", id), map[string]any{"duration": 30}, http.StatusUnprocessableEntity},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireProblem(t, e.Do(http.MethodPost, tc.path, tok, tc.body), tc.status)
		})
	}

	t.Run("reservation ids", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, id string
			status   int
		}{
			{"not a uuid", "not-a-uuid", http.StatusUnprocessableEntity},
			{"uuid with junk", "00000000-0000-0000-0000-00000000000g", http.StatusUnprocessableEntity},
			{"unknown uuid", "8d7a3f1e-2f6b-4c1a-9a51-0d1e2f3a4b5c", http.StatusNotFound},
		} {
			requireProblem(t, e.Do(http.MethodGet, "/api/v1/reservations/"+tc.id, tok, nil), tc.status)
			requireProblem(t, e.Do(http.MethodDelete, path+"/"+tc.id, tok, nil), tc.status)
		}
	})

	t.Cleanup(func() {
		// None of the bad requests may have reserved anything.
		assert.Equal(t, lockerStatus{ID: 1, Name: "available"}, towerLocker(t, e, tok, towerUnion1, id).Status)
	})
}

func TestReservationConflicts(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)

	t.Run("a reserved locker answers 409 naming its status", func(t *testing.T) {
		t.Parallel()
		id := lockerID(t, e, towerUnion1, smallHigh)
		reserve(t, e, tok, towerUnion1, id, 600)
		m := requireProblem(t, e.Do(http.MethodPost, reservePath(towerUnion1, id), tok, map[string]any{"duration": 60}), http.StatusConflict)
		assert.Contains(t, m["detail"], "reserved")
	})

	t.Run("twenty concurrent reservations of one locker: exactly one wins", func(t *testing.T) {
		t.Parallel()
		id := lockerID(t, e, towerUnion2, largeLow)
		const n = 20
		statuses := make([]int, n)
		details := make([]string, n)
		testenv.AtOnce(n, func(i int) {
			r, err := testenv.Exchange(http.MethodPost, e.URL+reservePath(towerUnion2, id),
				http.Header{"Authorization": {"Bearer " + tok}}, `{"duration": 600}`)
			if err != nil {
				details[i] = err.Error()
				return
			}
			statuses[i], details[i] = r.Status, string(r.Body)
		})
		counts := map[int]int{}
		for i, s := range statuses {
			counts[s]++
			if s == http.StatusConflict {
				assert.Contains(t, details[i], "reserved")
			}
		}
		assert.Equal(t, map[int]int{http.StatusCreated: 1, http.StatusConflict: n - 1}, counts)
		assert.Equal(t, "reserved", towerLocker(t, e, tok, towerUnion2, id).Status.Name)
	})
}

func TestCancelReservation(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)

	t.Run("cancel frees the locker and is repeatable", func(t *testing.T) {
		t.Parallel()
		id := lockerID(t, e, towerUnion1, mediumHigh)
		res := reserve(t, e, tok, towerUnion1, id, 600)

		r := cancelReservation(t, e, tok, res)
		require.Equal(t, http.StatusNoContent, r.Status, "body: %s", r.Body)
		assert.Empty(t, r.Body)
		assert.Equal(t, lockerStatus{ID: 1, Name: "available"}, towerLocker(t, e, tok, towerUnion1, id).Status)
		assert.Equal(t, "cancelled", getReservation(t, e, tok, res.ID).Status)

		again := cancelReservation(t, e, tok, res)
		assert.Equal(t, http.StatusNoContent, again.Status, "body: %s", again.Body)
		assert.Equal(t, "cancelled", getReservation(t, e, tok, res.ID).Status)

		st := workflowResult(t, e, res.ID)
		assert.Equal(t, contract.OutcomeCancelled, st.Outcome)
		assert.False(t, st.ExpiryApplied)

		// The locker can be reserved again at once.
		reserve(t, e, tok, towerUnion1, id, 60)
	})

	t.Run("another client of the organization cannot cancel", func(t *testing.T) {
		t.Parallel()
		id := lockerID(t, e, towerUnion1, smallHigh)
		res := reserve(t, e, tok, towerUnion1, id, 600)
		other := secondDemoClient(t, e, "demo-second-sp")

		requireProblem(t, cancelReservation(t, e, other, res), http.StatusConflict)
		assert.Equal(t, "reserved", towerLocker(t, e, tok, towerUnion1, id).Status.Name)
		assert.Equal(t, "active", getReservation(t, e, tok, res.ID).Status)
		// It may still read the reservation: same organization.
		assert.Equal(t, "active", getReservation(t, e, other, res.ID).Status)
	})

	t.Run("cancel through another locker's path is 404", func(t *testing.T) {
		t.Parallel()
		id := lockerID(t, e, towerUnion2, smallHigh)
		res := reserve(t, e, tok, towerUnion2, id, 600)
		wrong := reservePath(towerUnion2, lockerID(t, e, towerUnion2, mediumHigh)) + "/" + res.ID
		requireProblem(t, e.Do(http.MethodDelete, wrong, tok, nil), http.StatusNotFound)
		wrongTower := reservePath(towerUnion1, id) + "/" + res.ID
		requireProblem(t, e.Do(http.MethodDelete, wrongTower, tok, nil), http.StatusNotFound)
		assert.Equal(t, "active", getReservation(t, e, tok, res.ID).Status)
	})

	t.Run("an unknown reservation is 404", func(t *testing.T) {
		t.Parallel()
		path := reservePath(towerUnion1, lockerID(t, e, towerUnion1, largeLow)) + "/6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
		requireProblem(t, e.Do(http.MethodDelete, path, tok, nil), http.StatusNotFound)
	})
}

func TestReservationExpires(t *testing.T) {
	t.Parallel()
	e, tok := startDemo(t)
	id := lockerID(t, e, towerPasadena, smallHigh)
	res := reserve(t, e, tok, towerPasadena, id, 2)

	require.Eventually(t, func() bool {
		return towerLocker(t, e, tok, towerPasadena, id).Status.Name == "available" &&
			getReservation(t, e, tok, res.ID).Status == "expired"
	}, 30*time.Second, 100*time.Millisecond)

	st := workflowResult(t, e, res.ID)
	assert.Equal(t, contract.OutcomeExpired, st.Outcome)
	assert.True(t, st.ExpiryApplied)
	desc, err := e.Temporal.DescribeWorkflowExecution(context.Background(), contract.ReservationWorkflowID(res.ID), "")
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())

	// The rows were written back, not only read as lapsed.
	var resStatus string
	var lockerStatusID int
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT r.status, k.status FROM reservations r JOIN lockers k ON k.id = r.locker_id WHERE r.id = $1`, res.ID).
		Scan(&resStatus, &lockerStatusID))
	assert.Equal(t, "expired", resStatus)
	assert.Equal(t, 1, lockerStatusID)

	// A cancel after the expiry is refused: there is nothing left to cancel.
	requireProblem(t, cancelReservation(t, e, tok, res), http.StatusConflict)
}

func TestReservationLazyExpiry(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	tok := demoToken(t, e)
	id := lockerID(t, e, towerSantaMon, mediumLow)
	old := reserve(t, e, tok, towerSantaMon, id, 1)

	// No worker runs: nothing writes the expiry back, yet reads see it at once.
	require.Eventually(t, func() bool {
		return getReservation(t, e, tok, old.ID).Status == "expired"
	}, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, lockerStatus{ID: 1, Name: "available"}, towerLocker(t, e, tok, towerSantaMon, id).Status)
	locs := inArea(t, e, tok, laArea)
	assert.Equal(t, 12, locs["Santa Monica Pier"].LockerAvailability.AvailableLockers)

	fresh := reserve(t, e, tok, towerSantaMon, id, 3600)
	assert.Equal(t, "reserved", towerLocker(t, e, tok, towerSantaMon, id).Status.Name)

	// The late worker runs the old reservation's expiry; it must leave the new one alone.
	e.StartWorker()
	st := workflowResult(t, e, old.ID)
	assert.Equal(t, contract.OutcomeExpired, st.Outcome)
	assert.Equal(t, "reserved", towerLocker(t, e, tok, towerSantaMon, id).Status.Name)
	assert.Equal(t, "active", getReservation(t, e, tok, fresh.ID).Status)
	assert.Equal(t, "expired", getReservation(t, e, tok, old.ID).Status)
}
