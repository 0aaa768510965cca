package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

const tower = "0100000000000011" // the first demo tower (Union Station)

// lockerFixture drives one env: the admin command, the tower API and the tower simulator.
type lockerFixture struct {
	t   *testing.T
	e   *testenv.Env
	sim *towersim.Simulator
	a   string // the demo client's token
	b   string // another client's token
}

type tokenResp struct {
	ID          string `json:"id"`
	Payload     string `json:"payload"`
	PayloadAuth string `json:"payload_auth"`
}

// admin runs lockernet-admin with args and decodes its JSON answer.
func (f *lockerFixture) admin(args ...string) (map[string]any, error) {
	var out bytes.Buffer
	if err := run(context.Background(), args, &out); err != nil {
		return nil, err
	}
	var m map[string]any
	require.NoError(f.t, json.Unmarshal(out.Bytes(), &m), "output: %s", out.String())
	return m, nil
}

func (f *lockerFixture) outOfService(locker int64, extra ...string) (map[string]any, error) {
	return f.admin(append([]string{"locker", "out-of-service", "-tower", tower, "-locker", strconv.FormatInt(locker, 10), "-reason", "door jammed"}, extra...)...)
}

func (f *lockerFixture) inService(locker int64) (map[string]any, error) {
	return f.admin("locker", "in-service", "-tower", tower, "-locker", strconv.FormatInt(locker, 10))
}

func (f *lockerFixture) status(locker int64) string {
	f.t.Helper()
	st, ok := f.statuses("/api/v1/towers/"+tower+"/lockers", f.a)[locker]
	if !ok {
		f.t.Fatalf("no locker %d", locker)
	}
	return st
}

// statuses lists the lockers at path, asked with tok, and gives each one's status.
func (f *lockerFixture) statuses(path, tok string) map[int64]string {
	f.t.Helper()
	r := f.e.Do(http.MethodGet, path, tok, nil)
	require.Equal(f.t, http.StatusOK, r.Status)
	var ls []struct {
		ID     int64 `json:"id"`
		Status struct {
			Name string `json:"name"`
		} `json:"status"`
	}
	r.JSON(f.t, &ls)
	out := map[int64]string{}
	for _, l := range ls {
		out[l.ID] = l.Status.Name
	}
	return out
}

func (f *lockerFixture) token(tok, typ string, locker int64) (tokenResp, testenv.Response) {
	f.t.Helper()
	r := f.e.Do(http.MethodPost, fmt.Sprintf("/api/v1/towers/%s/lockers/%d/%s-locker-tokens", tower, locker, typ), tok, map[string]any{"duration": 600})
	var out tokenResp
	if r.Status == http.StatusCreated {
		r.JSON(f.t, &out)
	}
	return out, r
}

func (f *lockerFixture) mustToken(tok, typ string, locker int64) tokenResp {
	f.t.Helper()
	out, r := f.token(tok, typ, locker)
	require.Equal(f.t, http.StatusCreated, r.Status, "%s", r.Body)
	return out
}

func (f *lockerFixture) open(tk tokenResp, withItem bool) towersim.OpenResponse {
	f.t.Helper()
	res, err := f.sim.Open(context.Background(), tower, towersim.OpenRequest{Payload: tk.Payload, PayloadAuth: tk.PayloadAuth, CloseWithItem: &withItem})
	require.NoError(f.t, err)
	return res
}

func (f *lockerFixture) assigned(tok string) map[int64]string {
	f.t.Helper()
	return f.statuses("/api/v1/users/me/assigned-lockers", tok)
}

// outcome waits for a workflow to complete and returns its result's Outcome.
func (f *lockerFixture) outcome(workflowID string) string {
	f.t.Helper()
	ctx := context.Background()
	require.Eventually(f.t, func() bool {
		d, err := f.e.Temporal.DescribeWorkflowExecution(ctx, workflowID, "")
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}, time.Minute, 50*time.Millisecond, "workflow %s completes", workflowID)
	var st struct{ Outcome string }
	require.NoError(f.t, f.e.Temporal.GetWorkflow(ctx, workflowID, "").Get(ctx, &st))
	return st.Outcome
}

func (f *lockerFixture) tokenStatus(id string) string {
	f.t.Helper()
	var s string
	require.NoError(f.t, f.e.Store.Pool().QueryRow(context.Background(), `SELECT status FROM locker_tokens WHERE id = $1`, id).Scan(&s))
	return s
}

func (f *lockerFixture) locker(i int) int64 { return f.e.Seed.Towers[0].LockerIDs[i] }

// The operator's out-of-service / in-service command through every status of DESIGN §4.1.
// One env for all cases: t.Setenv (the command reads its settings from the environment) rules
// out parallel tests.
func TestLockerServiceState(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	e.SetAdminEnv(t)
	require.Equal(t, tower, e.Seed.Towers[0].ID)
	secret := credential.NewSecret()
	require.NoError(t, e.Store.CreateClient(context.Background(), store.Client{ClientID: "admin-test-b", OrganizationID: e.Creds.OrganizationID,
		Name: "second app", SecretHash: credential.Hash(secret), Scopes: []string{jwtauth.ScopeServiceProvider}}))
	f := &lockerFixture{t: t, e: e, sim: e.TowerSim(t), a: e.Token("service_provider")}
	f.b = clientToken(t, e, "admin-test-b", secret)

	t.Run("available", func(t *testing.T) {
		f.t = t
		k := f.locker(0)
		out, err := f.outOfService(k)
		require.NoError(t, err)
		assert.Equal(t, "available", out["from"])
		assert.Equal(t, "out_of_service", out["to"])
		assert.Equal(t, "out_of_service", f.status(k))
		_, r := f.token(f.a, "dropoff", k)
		assert.Equal(t, http.StatusConflict, r.Status)
		r = e.Do(http.MethodPost, fmt.Sprintf("/api/v1/towers/%s/lockers/%d/reservations", tower, k), f.a, map[string]any{"duration": 60})
		assert.Equal(t, http.StatusConflict, r.Status)

		out, err = f.outOfService(k)
		require.NoError(t, err, "doing it twice changes nothing")
		assert.Equal(t, "out_of_service", out["from"])

		// By door label too.
		out, err = f.admin("locker", "in-service", "-tower", tower, "-locker", "1")
		require.NoError(t, err)
		assert.EqualValues(t, k, out["lockerId"])
		assert.Equal(t, "available", out["to"])
		assert.Equal(t, "available", f.status(k))
		f.mustToken(f.a, "dropoff", k)
	})

	t.Run("reserved", func(t *testing.T) {
		f.t = t
		k := f.locker(1)
		r := e.Do(http.MethodPost, fmt.Sprintf("/api/v1/towers/%s/lockers/%d/reservations", tower, k), f.b, map[string]any{"duration": 600})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		resID := r.Map(t)["id"].(string)
		out, err := f.outOfService(k)
		require.NoError(t, err)
		assert.Equal(t, "reserved", out["from"])
		assert.Equal(t, resID, out["cancelledReservation"])
		r = e.Do(http.MethodGet, "/api/v1/reservations/"+resID, f.b, nil)
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, "cancelled", r.Map(t)["status"])
		assert.Equal(t, contract.OutcomeCancelled, f.outcome(contract.ReservationWorkflowID(resID)))
		assert.NotContains(t, f.assigned(f.b), k)
		_, err = f.inService(k)
		require.NoError(t, err)
		assert.Equal(t, "available", f.status(k), "the reservation does not come back")
	})

	t.Run("rented", func(t *testing.T) {
		f.t = t
		k := f.locker(2)
		d1 := f.mustToken(f.a, "dropoff", k)
		d2 := f.mustToken(f.a, "dropoff", k)
		out, err := f.outOfService(k)
		require.NoError(t, err)
		assert.Equal(t, "rented", out["from"])
		assert.EqualValues(t, 2, out["revokedTokens"])
		for _, d := range []tokenResp{d1, d2} {
			assert.Equal(t, "revoked", f.tokenStatus(d.ID))
			assert.Equal(t, contract.TokenOutcomeRevoked, f.outcome(contract.LockerTokenWorkflowID(d.ID)))
		}
		assert.NotContains(t, f.assigned(f.a), k)
		_, err = f.inService(k)
		require.NoError(t, err)
		assert.Equal(t, "available", f.status(k))

		// The tower verifies offline, but the phone's session syncs the cloud's commands first:
		// the out-of-service change wrote the locker's new generation floor, so the revoked
		// token is refused although the tower never saw a later token (DESIGN §4.8).
		res := f.open(d1, true)
		assert.False(t, res.Opened)
		require.NotNil(t, res.Error)
		assert.Equal(t, "stale_generation", *res.Error)
		assert.Equal(t, "available", f.status(k))
		var anomalies int
		require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM tower_anomalies WHERE locker_id = $1`, k).Scan(&anomalies))
		assert.Zero(t, anomalies, "nothing opened, so nothing to explain")

		// Once the next possession's token has been used there, the revoked one is refused.
		nd := f.mustToken(f.b, "dropoff", k)
		require.True(t, f.open(nd, true).Opened)
		assert.Equal(t, "occupied", f.status(k))
		res = f.open(d2, true)
		assert.False(t, res.Opened)
		require.NotNil(t, res.Error)
		assert.Equal(t, "stale_generation", *res.Error)
		assert.Equal(t, "occupied", f.status(k))
		assert.Contains(t, f.assigned(f.b), k)
	})

	t.Run("declined", func(t *testing.T) {
		f.t = t
		k := f.locker(3)
		d := f.mustToken(f.a, "dropoff", k)
		r := e.Do(http.MethodPost, fmt.Sprintf("/api/v1/towers/%s/lockers/%d/release", tower, k), f.a, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		out, err := f.outOfService(k)
		require.NoError(t, err)
		assert.Equal(t, "declined", out["from"])
		assert.Equal(t, contract.TokenOutcomeRevoked, f.outcome(contract.LockerTokenWorkflowID(d.ID)))
		assert.NotContains(t, f.assigned(f.a), k)
		_, err = f.inService(k)
		require.NoError(t, err)
		assert.Equal(t, "available", f.status(k))
	})

	t.Run("occupied", func(t *testing.T) {
		f.t = t
		k := f.locker(4)
		d := f.mustToken(f.a, "dropoff", k)
		require.True(t, f.open(d, true).Opened)
		p := f.mustToken(f.a, "pickup", k)
		require.Equal(t, "occupied", f.status(k))

		_, err := f.outOfService(k)
		require.Error(t, err, "an item is inside: the operator must force it")
		assert.Contains(t, err.Error(), "occupied")
		assert.Equal(t, "occupied", f.status(k))
		assert.Equal(t, "active", f.tokenStatus(p.ID))

		out, err := f.outOfService(k, "-force")
		require.NoError(t, err)
		assert.Equal(t, "occupied", out["from"])
		assert.Equal(t, "out_of_service", f.status(k))
		assert.Equal(t, "out_of_service", f.assigned(f.a)[k], "the possession is kept: the item is inside")
		assert.Equal(t, contract.TokenOutcomeRevoked, f.outcome(contract.LockerTokenWorkflowID(p.ID)))
		_, r := f.token(f.a, "pickup", k)
		assert.Equal(t, http.StatusConflict, r.Status)

		out, err = f.inService(k)
		require.NoError(t, err)
		assert.Equal(t, "occupied", out["to"])
		assert.Equal(t, "occupied", f.status(k))
		assert.Equal(t, "occupied", f.assigned(f.a)[k])
		_, r = f.token(f.b, "pickup", k)
		assert.Equal(t, http.StatusConflict, r.Status, "still the first client's item")

		// The possessor picks the item up with a new token.
		np := f.mustToken(f.a, "pickup", k)
		require.True(t, f.open(np, false).Opened)
		assert.Equal(t, "available", f.status(k))
		assert.NotContains(t, f.assigned(f.a), k)
	})

	t.Run("bad invocations", func(t *testing.T) {
		f.t = t
		k := f.locker(5)
		for name, args := range map[string][]string{
			"no verb":        {"locker"},
			"unknown verb":   {"locker", "broken", "-tower", tower, "-locker", "1"},
			"no reason":      {"locker", "out-of-service", "-tower", tower, "-locker", "1"},
			"no tower":       {"locker", "out-of-service", "-locker", "1", "-reason", "x"},
			"unknown locker": {"locker", "out-of-service", "-tower", tower, "-locker", "99", "-reason", "x"},
			"unknown id":     {"locker", "in-service", "-tower", tower, "-locker", "999999"},
			"other tower":    {"locker", "out-of-service", "-tower", "0100000000000099", "-locker", strconv.FormatInt(k, 10), "-reason", "x"},
		} {
			_, err := f.admin(args...)
			assert.Error(t, err, name)
		}
		assert.Equal(t, "available", f.status(k))
	})
}

func clientToken(t *testing.T, e *testenv.Env, id, secret string) string {
	t.Helper()
	return testenv.ClientToken(t, e.URL+"/oauth/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}, nil)
}
