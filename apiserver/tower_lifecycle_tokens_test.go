package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// Bad bodies, unknown and foreign lockers: 4xx with a problem body, and nothing changes.
func TestLifecycleTokenBadInput(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	tok := e.Token("service_provider")
	k := lockerID(t, e, towerUnion1, smallHigh)

	for _, typ := range []string{"dropoff", "pickup", "release"} {
		for _, tc := range []struct {
			name string
			body string
			want int
		}{
			{"zero duration", `{"duration": 0}`, http.StatusUnprocessableEntity},
			{"duration over a day", `{"duration": 86401}`, http.StatusUnprocessableEntity},
			{"negative duration", `{"duration": -5}`, http.StatusUnprocessableEntity},
			{"fractional duration", `{"duration": 1.5}`, http.StatusUnprocessableEntity},
			{"duration as text", `{"duration": "x"}`, http.StatusUnprocessableEntity},
			{"missing duration", `{}`, http.StatusUnprocessableEntity},
			{"null duration", `{"duration": null}`, http.StatusUnprocessableEntity},
			{"client_info too long", `{"duration": 60, "client_info": "` + strings.Repeat("é", 257) + `"}`, http.StatusUnprocessableEntity},
			{"client_info not a string", `{"duration": 60, "client_info": 7}`, http.StatusUnprocessableEntity},
			{"not an object", `[60]`, http.StatusUnprocessableEntity},
			{"not JSON", `duration=60`, http.StatusBadRequest}, // huma: an unparsable body is 400
		} {
			t.Run(typ+"/"+tc.name, func(t *testing.T) {
				requireProblem(t, lcIssue(t, e, tok, typ, towerUnion1, k, tc.body), tc.want)
			})
		}
	}
	assert.Equal(t, "available", lockerStatusName(t, e, tok, towerUnion1, k), "no bad request changed the locker")
	assert.Zero(t, lcCount(t, e, `SELECT count(*) FROM locker_tokens`))

	// 256 characters and a null client_info are fine.
	r := lcIssue(t, e, tok, "dropoff", towerUnion1, k, map[string]any{"duration": 60, "client_info": strings.Repeat("é", 256)})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	assert.Equal(t, strings.Repeat("é", 256), r.Map(t)["clientInfo"])
	r = lcIssue(t, e, tok, "dropoff", towerUnion1, k, `{"duration": 60, "client_info": null}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	body := r.Map(t)
	assert.Contains(t, body, "clientInfo")
	assert.Nil(t, body["clientInfo"])
	for _, f := range []string{"payload", "payload_auth"} {
		s, _ := body[f].(string)
		assert.Regexp(t, `^([0-9a-f]{2})+$`, s, "%s is even-length lower-case hex", f)
	}
	assert.Regexp(t, timestampRE, body["createdAt"])
	assert.Regexp(t, timestampRE, body["expiresAt"])
	assert.Equal(t, sorted("id", "type", "lockerId", "towerId", "clientInfo", "createdAt", "expiresAt", "payload", "payload_auth"), keys(body))

	// Unknown and foreign lockers and towers: 404.
	other := e.NewOtherOrg(t)
	for _, tc := range []struct {
		name, tower string
		locker      int64
	}{
		{"unknown locker", towerUnion1, 999999},
		{"locker of another demo tower", towerUnion1, lockerID(t, e, towerUnion2, smallHigh)},
		{"unknown tower", "0100000000000099", k},
		{"another organization's tower", other.TowerID, other.LockerID},
		{"another organization's locker on our tower", towerUnion1, other.LockerID},
	} {
		for _, typ := range []string{"dropoff", "pickup", "release"} {
			requireProblem(t, lcIssue(t, e, tok, typ, tc.tower, tc.locker, map[string]any{"duration": 60}), http.StatusNotFound)
		}
	}
	// Tower ids are case-insensitive; a malformed one is refused before any lookup.
	r = lcIssue(t, e, tok, "dropoff", strings.ToUpper("0100000000000011"), k, map[string]any{"duration": 60})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	assert.Equal(t, towerUnion1, r.Map(t)["towerId"])
	requireProblem(t, lcIssue(t, e, tok, "dropoff", "not-a-tower", k, map[string]any{"duration": 60}), http.StatusUnprocessableEntity)

	// The other organization cannot touch our lockers either.
	otherTok := otherOrgToken(t, e, other)
	requireProblem(t, lcIssue(t, e, otherTok, "dropoff", towerUnion1, k, map[string]any{"duration": 60}), http.StatusNotFound)
	requireProblem(t, e.Do(http.MethodPost, lcReleasePath(towerUnion1, k), otherTok, nil), http.StatusNotFound)

	// Only service_provider may take tokens.
	requireProblem(t, lcIssue(t, e, e.Token("tower_access"), "dropoff", towerUnion1, k, map[string]any{"duration": 60}), http.StatusForbidden)
	requireProblem(t, lcIssue(t, e, "", "dropoff", towerUnion1, k, map[string]any{"duration": 60}), http.StatusUnauthorized)
}

// Which token each status allows, and to whom (DESIGN §4.1, §4.5).
func TestLifecycleTokenStatusRules(t *testing.T) {
	t.Parallel()
	e, sim, a := lcStart(t)
	b := secondDemoClient(t, e, "lc-second-client")
	k := lockerID(t, e, towerUnion1, smallHigh)
	body := map[string]any{"duration": 300}

	// available: drop-off only.
	lcConflict(t, lcIssue(t, e, a, "pickup", towerUnion1, k, body), "available")
	lcConflict(t, lcIssue(t, e, a, "release", towerUnion1, k, body), "available")

	// reserved by B: A gets 409 for every token; B's drop-off consumes the reservation.
	res := reserve(t, e, b, towerUnion1, k, 300)
	lcConflict(t, lcIssue(t, e, a, "dropoff", towerUnion1, k, body), "reserved")
	lcConflict(t, lcIssue(t, e, a, "pickup", towerUnion1, k, body), "reserved")
	lcConflict(t, lcIssue(t, e, b, "pickup", towerUnion1, k, body), "reserved")
	lcConflict(t, lcIssue(t, e, b, "release", towerUnion1, k, body), "reserved")
	d1 := lcMustIssue(t, e, b, "dropoff", towerUnion1, k, 300)
	assert.Equal(t, "rented", lockerStatusName(t, e, a, towerUnion1, k))
	require.Eventually(t, func() bool { return getReservation(t, e, b, res.ID).Status == "consumed" }, lcWait, 50*time.Millisecond)

	// rented by B: A gets 409; B may take more drop-off tokens but no pickup or release token.
	lcConflict(t, lcIssue(t, e, a, "dropoff", towerUnion1, k, body), "rented")
	lcConflict(t, lcIssue(t, e, a, "pickup", towerUnion1, k, body), "rented")
	lcConflict(t, lcIssue(t, e, b, "pickup", towerUnion1, k, body), "rented")
	lcConflict(t, lcIssue(t, e, b, "release", towerUnion1, k, body), "rented")
	lcConflict(t, e.Do(http.MethodPost, reservePath(towerUnion1, k), a, body), "rented")
	d2 := lcMustIssue(t, e, b, "dropoff", towerUnion1, k, 300)
	assert.Equal(t, lcDecode(t, e, d1).Generation, lcDecode(t, e, d2).Generation, "tokens of one possession share its generation")

	// occupied by B: A gets 409; B may take drop-off and pickup tokens, not a release token.
	lcRequireOpened(t, lcOpen(t, sim, towerUnion1, d1, true))
	require.Equal(t, "occupied", lockerStatusName(t, e, a, towerUnion1, k))
	lcConflict(t, lcIssue(t, e, a, "dropoff", towerUnion1, k, body), "occupied")
	lcConflict(t, lcIssue(t, e, a, "pickup", towerUnion1, k, body), "occupied")
	lcConflict(t, lcIssue(t, e, b, "release", towerUnion1, k, body), "occupied")
	lcMustIssue(t, e, b, "dropoff", towerUnion1, k, 300)
	lcMustIssue(t, e, b, "pickup", towerUnion1, k, 300)
	assert.Equal(t, "occupied", lockerStatusName(t, e, a, towerUnion1, k), "tokens on an occupied locker keep it occupied")

	// out of service: nobody gets anything.
	k2 := lockerID(t, e, towerUnion1, smallHigh+1)
	_, err := e.Store.SetOutOfService(context.Background(), towerUnion1, k2, "door jammed", false)
	require.NoError(t, err)
	for _, typ := range []string{"dropoff", "pickup", "release"} {
		lcConflict(t, lcIssue(t, e, a, typ, towerUnion1, k2, body), "out_of_service")
	}
	lcConflict(t, e.Do(http.MethodPost, reservePath(towerUnion1, k2), a, body), "out_of_service")
	lcConflict(t, e.Do(http.MethodPost, lcReleasePath(towerUnion1, k2), a, nil), "out_of_service")

	// declined by B: only B, only drop-off or release tokens.
	k3 := lockerID(t, e, towerUnion1, smallHigh+2)
	lcMustIssue(t, e, b, "dropoff", towerUnion1, k3, 300)
	r := e.Do(http.MethodPost, lcReleasePath(towerUnion1, k3), b, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	for _, typ := range []string{"dropoff", "pickup", "release"} {
		lcConflict(t, lcIssue(t, e, a, typ, towerUnion1, k3, body), "declined")
	}
	lcConflict(t, lcIssue(t, e, b, "pickup", towerUnion1, k3, body), "declined")
	lcMustIssue(t, e, b, "release", towerUnion1, k3, 300)
	assert.Equal(t, "declined", lockerStatusName(t, e, a, towerUnion1, k3), "a release token changes nothing until it is used")
}

// Concurrent drop-off tokens: one client's all succeed in one possession; of several
// clients exactly one gets the locker.
func TestLifecycleConcurrentDropoffTokens(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	a := e.Token("service_provider")
	toks := []string{a, secondDemoClient(t, e, "lc-race-b"), secondDemoClient(t, e, "lc-race-c")}
	race := func(k int64, callers []string) []testenv.Response {
		out := make([]testenv.Response, len(callers))
		testenv.AtOnce(len(callers), func(i int) {
			status, body, err := rawDo(http.MethodPost, e.URL+lcTokenPath("dropoff", towerUnion1, k), callers[i], map[string]any{"duration": 600})
			if err != nil {
				status = -1
			}
			out[i] = testenv.Response{Status: status, Body: body}
		})
		return out
	}

	k := lockerID(t, e, towerUnion1, smallHigh)
	var gens []uint32
	for _, r := range race(k, []string{a, a, a, a, a}) {
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		var tk towerTokenResp
		r.JSON(t, &tk)
		gens = append(gens, lcDecode(t, e, tk).Generation)
	}
	for _, g := range gens {
		assert.Equal(t, gens[0], g, "one possession, one generation")
	}
	assert.Equal(t, int32(gens[0]), lcLockerRow(t, e, k).Generation)
	got := lcAssigned(t, e, a)[k]
	require.NotNil(t, got.Possession)
	assert.Len(t, got.Possession.ActiveTokens, 5)

	k2 := lockerID(t, e, towerUnion1, smallHigh+1)
	won := -1
	for i, r := range race(k2, toks) {
		switch r.Status {
		case http.StatusCreated:
			require.Equal(t, -1, won, "a second winner")
			won = i
		case http.StatusConflict:
			assert.Contains(t, string(r.Body), "rented")
		default:
			t.Fatalf("answered %d: %s", r.Status, r.Body)
		}
	}
	require.NotEqual(t, -1, won, "one caller wins")
	assert.Contains(t, lcAssigned(t, e, toks[won]), k2)
}
