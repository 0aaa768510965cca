package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

// codeEnv is an env with the demo gateways running and their lockers mirrored.
type codeEnv struct {
	*testenv.Env
	gw1      *testenv.Gateway
	admin    string
	location string // Downtown Hub, GW-0001
}

func startCodeEnv(t *testing.T) *codeEnv {
	t.Helper()
	return startCodeEnvWith(t, testenv.Options{})
}

// startCodeEnvWith is startCodeEnv with more options (the gateway settings are the scaled
// ones whatever opts says).
func startCodeEnvWith(t *testing.T, opts testenv.Options) *codeEnv {
	t.Helper()
	opts.Cloud = testenv.ScaledCloudSettings()
	e := testenv.Start(t, opts)
	gw1, _ := e.StartDemoGatewaysMirrored(t)
	return &codeEnv{Env: e, gw1: gw1, admin: e.Creds.AppEngineAPIKey, location: fmt.Sprint(gw1.LocationID)}
}

func (c *codeEnv) call(t *testing.T, key, method, path string, body any) testenv.Response {
	t.Helper()
	return testenv.DoWithHeaders(t, method, c.URL+path, map[string]string{"x-api-key": key}, body)
}

func (c *codeEnv) create(t *testing.T, locker string, singleUse bool, expiry time.Time) map[string]any {
	t.Helper()
	r := c.call(t, c.admin, http.MethodPost, "/locker", map[string]any{"location_id": c.location, "locker_name": locker,
		"single_use": singleUse, "expiry": expiry.Format(time.RFC3339)})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return r.Map(t)
}

func (c *codeEnv) open(t *testing.T, key, code string) testenv.Response {
	return c.call(t, key, http.MethodPost, "/locker/open", map[string]any{"location_id": c.location, "access_code": code})
}

// gatewayHolds reports whether the gateway holds a transaction with this id.
func (c *codeEnv) gatewayHolds(t *testing.T, id string) bool {
	resp, _, err := c.gw1.Do(context.Background(), http.MethodGet, "/transactions/"+id, nil)
	require.NoError(t, err)
	return resp.StatusCode == http.StatusOK
}

func TestAccessCodeLifecycle(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)

	code := c.create(t, "A01", false, time.Now().Add(time.Hour))
	id, digits := code["id"].(string), code["access_code"].(string)
	assert.Regexp(t, `^\d{6}$`, digits)
	assert.Equal(t, c.location, code["location_id"])
	assert.Equal(t, "A01", code["locker_name"])
	assert.Equal(t, "active", code["status"])
	assert.True(t, c.gatewayHolds(t, id), "the code holds its locker through a gateway transaction with its id")

	t.Run("one active code per locker", func(t *testing.T) {
		r := c.call(t, c.admin, http.MethodPost, "/locker", map[string]any{"location_id": c.location, "locker_name": "A01",
			"single_use": true, "expiry": time.Now().Add(time.Hour).Format(time.RFC3339)})
		assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		assert.Contains(t, string(r.Body), "already has an active access code")
	})

	t.Run("lists", func(t *testing.T) {
		for _, path := range []string{"/locker/all/access-codes?location_id=" + c.location,
			"/locker/access-codes?location_id=" + c.location + "&locker_name=A01",
			fmt.Sprintf("/sub-organization/%d/access-codes", c.Creds.SubOrganizationID)} {
			r := c.call(t, c.admin, http.MethodGet, path, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
			var list []map[string]any
			r.JSON(t, &list)
			require.Len(t, list, 1, path)
			assert.Equal(t, digits, list[0]["access_code"], "the scope that made it sees the code")
		}
		r := c.call(t, c.admin, http.MethodGet, "/locker/access-codes?location_id="+c.location+"&locker_name=A02", nil)
		assert.Equal(t, "[]\n", string(r.Body))
	})

	t.Run("opens the door, again and again", func(t *testing.T) {
		for i := 1; i <= 2; i++ {
			r := c.open(t, c.admin, digits)
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			m := r.Map(t)
			assert.Equal(t, true, m["success"])
			assert.Equal(t, "A01", m["locker_name"])
			assert.Equal(t, true, m["door_open"])
			assert.NotEmpty(t, m["request_id"])
			assert.Equal(t, i, c.gw1.Sim.Opens(101), "one real door actuation per open")
		}
	})

	t.Run("close reads the door", func(t *testing.T) {
		r := c.call(t, c.admin, http.MethodPost, "/locker/close", map[string]any{"location_id": c.location, "locker_name": "A01"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		m := r.Map(t)
		assert.Equal(t, "A01", m["locker_name"])
		assert.Equal(t, true, m["door_open"], "the simulated door is still open: reported, not an error")
		require.True(t, c.gw1.Sim.CloseDoor(101, false))
		r = c.call(t, c.admin, http.MethodPost, "/locker/close", map[string]any{"location_id": c.location, "locker_name": "A01"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, false, r.Map(t)["door_open"])
	})

	t.Run("opens and closes are transactions", func(t *testing.T) {
		require.Eventually(t, func() bool {
			r := c.call(t, c.admin, http.MethodGet, "/dropoff/organization/transactions?type=open", nil)
			return r.Status == http.StatusOK && r.Map(t)["total_count"] == float64(2)
		}, 10*time.Second, 50*time.Millisecond)
		r := c.call(t, c.admin, http.MethodGet, "/dropoff/organization/transactions?type=open&pickup_code="+digits, nil)
		page := r.Map(t)
		assert.EqualValues(t, 2, page["total_count"], "found by the code, through its keyed hash")
		row := page["data"].([]any)[0].(map[string]any)
		assert.Equal(t, "****"+digits[4:], row["pickup_code"])
		assert.Equal(t, "A01", row["locker_number"])
		assert.Equal(t, "Downtown Hub", row["location"])
		assert.Equal(t, "GW-0001", row["tower_name"])
		assert.Equal(t, "opened", row["status"])
		r = c.call(t, c.admin, http.MethodGet, "/dropoff/organization/transactions?type=close", nil)
		assert.EqualValues(t, 2, r.Map(t)["total_count"])
	})

	t.Run("remove", func(t *testing.T) {
		r := c.call(t, c.admin, http.MethodPatch, "/locker/access-code/"+id, map[string]any{"status": "removed"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "removed", r.Map(t)["status"])
		assert.Equal(t, http.StatusForbidden, c.open(t, c.admin, digits).Status, "a removed code opens nothing")
		require.Eventually(t, func() bool { return !c.gatewayHolds(t, id) }, 30*time.Second, 100*time.Millisecond, "its hold is released")
		assert.Equal(t, 2, c.gw1.Sim.Opens(101))
		r = c.call(t, c.admin, http.MethodPatch, "/locker/access-code/"+id, map[string]any{"status": "removed"})
		assert.Equal(t, http.StatusOK, r.Status, "removing again answers the same")
		assert.Equal(t, http.StatusUnprocessableEntity, c.call(t, c.admin, http.MethodPatch, "/locker/access-code/"+id, map[string]any{"status": "active"}).Status)
		// The locker can take a new code.
		c.create(t, "A01", true, time.Now().Add(time.Hour))
	})
}

func TestAccessCodeSingleUseRace(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)
	code := c.create(t, "A02", true, time.Now().Add(time.Hour))
	id, digits := code["id"].(string), code["access_code"].(string)

	statuses := concurrentStatuses(20, func() int {
		return testenv.DoWithHeaders(t, http.MethodPost, c.URL+"/locker/open", map[string]string{"x-api-key": c.admin},
			map[string]any{"location_id": c.location, "access_code": digits}).Status
	})
	ok, refused := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusForbidden, http.StatusTooManyRequests:
			// A loser that found the code used up counts as a failed attempt; after ten, the
			// key is held off the location for the window.
			refused++
		}
	}
	assert.Equal(t, 1, ok, "statuses: %v", statuses)
	assert.Equal(t, 19, refused, "statuses: %v", statuses)
	assert.Equal(t, 1, c.gw1.Sim.Opens(102), "one door actuation")
	fresh := testenv.NewAppKey(t, c.Env, c.Creds.OrganizationID)
	assert.Equal(t, http.StatusForbidden, c.open(t, fresh, digits).Status, "used up")
	require.Eventually(t, func() bool { return !c.gatewayHolds(t, id) }, 30*time.Second, 100*time.Millisecond, "a used-up code's hold is released")
}

func TestAccessCodeExpires(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)
	code := c.create(t, "A03", false, time.Now().Add(3*time.Second))
	id, digits := code["id"].(string), code["access_code"].(string)
	require.Eventually(t, func() bool { return !c.gatewayHolds(t, id) }, 60*time.Second, 200*time.Millisecond, "released at expiry")
	assert.Equal(t, http.StatusForbidden, c.open(t, c.admin, digits).Status)
	assert.Zero(t, c.gw1.Sim.Opens(103))
	r := c.call(t, c.admin, http.MethodGet, "/locker/access-codes?location_id="+c.location+"&locker_name=A03", nil)
	assert.Equal(t, "[]\n", string(r.Body), "expired codes are not listed")
}

func TestAccessCodeBadInput(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)
	other := c.NewOtherOrg(t)
	future := time.Now().Add(time.Hour).Format(time.RFC3339)
	union := fmt.Sprint(c.Creds.Towers[0].LocationID)
	for _, tc := range []struct {
		name   string
		body   any
		status int
	}{
		{"expiry in the past", map[string]any{"location_id": c.location, "locker_name": "A04", "single_use": true, "expiry": time.Now().Add(-time.Minute).Format(time.RFC3339)}, 422},
		{"expiry beyond a year", map[string]any{"location_id": c.location, "locker_name": "A04", "single_use": true, "expiry": time.Now().AddDate(1, 0, 2).Format(time.RFC3339)}, 422},
		{"expiry not RFC 3339", map[string]any{"location_id": c.location, "locker_name": "A04", "single_use": true, "expiry": "tomorrow"}, 422},
		{"expiry with an offset is fine", map[string]any{"location_id": c.location, "locker_name": "A05", "single_use": true, "expiry": time.Now().Add(time.Hour).In(time.FixedZone("PST", -8*3600)).Format(time.RFC3339)}, 200},
		{"unknown locker", map[string]any{"location_id": c.location, "locker_name": "Z99", "single_use": true, "expiry": future}, 404},
		{"unknown location", map[string]any{"location_id": "999999", "locker_name": "A04", "single_use": true, "expiry": future}, 404},
		{"a tower location, not a gateway's", map[string]any{"location_id": union, "locker_name": "1", "single_use": true, "expiry": future}, 404},
		{"another organization's location", map[string]any{"location_id": fmt.Sprint(other.LocationID), "locker_name": "1", "single_use": true, "expiry": future}, 404},
		{"location id not a number", map[string]any{"location_id": "abc", "locker_name": "A04", "single_use": true, "expiry": future}, 422},
		{"missing locker name", map[string]any{"location_id": c.location, "single_use": true, "expiry": future}, 422},
	} {
		r := c.call(t, c.admin, http.MethodPost, "/locker", tc.body)
		assert.Equal(t, tc.status, r.Status, "%s: %s", tc.name, r.Body)
	}
	assert.Equal(t, http.StatusNotFound, c.call(t, c.admin, http.MethodGet, "/locker/all/access-codes?location_id=999999", nil).Status)
	assert.Equal(t, http.StatusUnprocessableEntity, c.call(t, c.admin, http.MethodGet, "/locker/all/access-codes?location_id=abc", nil).Status)
	assert.Equal(t, http.StatusUnauthorized, c.call(t, "", http.MethodPost, "/locker/open", map[string]any{"location_id": c.location, "access_code": "123456"}).Status)
}

// guessable creates a reusable code for the locker, valid for an hour, and returns its
// digits and six digits that are not them.
func (c *codeEnv) guessable(t *testing.T, locker string) (digits, wrong string) {
	t.Helper()
	digits = c.create(t, locker, false, time.Now().Add(time.Hour))["access_code"].(string)
	if digits == "000000" {
		return digits, "000001"
	}
	return digits, "000000"
}

func TestAccessCodeGuessLimit(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)
	digits, wrong := c.guessable(t, "A06")
	for i := 0; i < 10; i++ {
		r := c.open(t, c.admin, wrong)
		require.Equal(t, http.StatusForbidden, r.Status, "attempt %d: %s", i+1, r.Body)
		assert.Contains(t, string(r.Body), "ACCESS_CODE_INVALID")
	}
	r := c.open(t, c.admin, digits)
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "even the right code waits for the window: %s", r.Body)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Zero(t, c.gw1.Sim.Opens(106), "no door touched")
	for _, bad := range []string{"12345", "abcdef", "", strings.Repeat("1", 20)} {
		// Malformed codes are wrong codes too; the limit already holds.
		assert.Equal(t, http.StatusTooManyRequests, c.open(t, c.admin, bad).Status)
	}
}

func TestAccessCodeTenancyAndScope(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)
	code := c.create(t, "A07", false, time.Now().Add(time.Hour))
	digits := code["access_code"].(string)

	// A sub-organization key sees the code (Downtown Hub is in its sub-organization), masked:
	// an org-wide key made it.
	r := c.call(t, c.admin, http.MethodPost, "/auth/api-key", map[string]any{"client_id": c.Creds.ServiceProvider.ClientID,
		"client_secret": c.Creds.ServiceProvider.ClientSecret, "organization_id": c.Creds.OrganizationID, "sub_organization_id": c.Creds.SubOrganizationID})
	require.Equal(t, http.StatusOK, r.Status)
	subKey := r.Map(t)["api_key"].(string)
	r = c.call(t, subKey, http.MethodGet, "/locker/all/access-codes?location_id="+c.location, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var list []map[string]any
	r.JSON(t, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "****"+digits[4:], list[0]["access_code"])

	// Culver City is outside the sub-organization: 404 for the sub-organization key.
	culver := fmt.Sprint(c.Seed.GatewayLocationID["GW-0002"])
	assert.Equal(t, http.StatusNotFound, c.call(t, subKey, http.MethodGet, "/locker/all/access-codes?location_id="+culver, nil).Status)
	// So are the door requests there: the org-wide key polls one, the sub-organization key
	// is told it does not exist.
	gw2, err := c.Store.GatewayAtLocation(context.Background(), c.Creds.OrganizationID, c.Seed.GatewayLocationID["GW-0002"])
	require.NoError(t, err)
	reqID := uuid.New()
	_, _, err = c.Store.CreateGatewayRequest(context.Background(), store.NewGatewayRequest{ID: reqID, OrganizationID: c.Creds.OrganizationID,
		LocationID: gw2.LocationID, GatewayID: gw2.ID, GatewaySerial: gw2.Serial, Kind: gatewayreq.KindAccessCodeClose, Class: "write",
		Method: http.MethodPost, Path: "/locker/close", GatewayPath: "/transactions/x/complete"}, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, c.call(t, c.admin, http.MethodGet, "/locker/requests/"+reqID.String(), nil).Status)
	assert.Equal(t, http.StatusNotFound, c.call(t, subKey, http.MethodGet, "/locker/requests/"+reqID.String(), nil).Status)

	// Another organization's key cannot use or see the code.
	other := c.NewOtherOrg(t)
	otherKey := testenv.NewAppKey(t, c.Env, other.OrgID)
	assert.Equal(t, http.StatusNotFound, c.open(t, otherKey, digits).Status)
	assert.Equal(t, http.StatusNotFound, c.call(t, otherKey, http.MethodPatch, "/locker/access-code/"+code["id"].(string), map[string]any{"status": "removed"}).Status)
	assert.Zero(t, c.gw1.Sim.Opens(107))
}

func TestAccessCodeGatewayDown(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)
	code := c.create(t, "A08", true, time.Now().Add(time.Hour))
	digits := code["access_code"].(string)

	c.gw1.SetFaults(t, simctl.Faults{Mode: simctl.ModeUnreachable})
	r := c.open(t, c.admin, digits)
	assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), "DISPATCH_FAILED")

	// Never delivered: the single-use code was given back and opens once the gateway is back.
	c.gw1.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})
	require.Eventually(t, func() bool { return c.open(t, c.admin, digits).Status == http.StatusOK }, 10*time.Second, 200*time.Millisecond)
	assert.Equal(t, 1, c.gw1.Sim.Opens(108))

	// A hanging gateway: 202 with the request to poll.
	code = c.create(t, "B01", false, time.Now().Add(time.Hour))
	c.gw1.SetFaults(t, simctl.Faults{Mode: simctl.ModeHang})
	r = c.open(t, c.admin, code["access_code"].(string))
	require.Contains(t, []int{http.StatusAccepted, http.StatusGatewayTimeout}, r.Status, "%s", r.Body)
	if r.Status == http.StatusAccepted {
		rid := r.Map(t)["request_id"].(string)
		assert.Equal(t, "/locker/requests/"+rid, r.Header.Get("Location"))
		c.gw1.SetFaults(t, simctl.Faults{Mode: simctl.ModeNone})
		require.Eventually(t, func() bool {
			p := c.call(t, c.admin, http.MethodGet, "/locker/requests/"+rid, nil)
			return p.Status != http.StatusOK || p.Map(t)["locker_name"] != nil
		}, 60*time.Second, 200*time.Millisecond)
	}
}

// 40 simultaneous wrong guesses: at most 10 are judged (403), the rest wait (429); with
// end_user_id each end user has an own limit, so one person's mistakes lock nobody else out.
func TestAccessCodeGuessLimitIsAtomicAndPerEndUser(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)
	digits, wrong := c.guessable(t, "A04")
	statuses := concurrentStatuses(40, func() int {
		return c.call(t, c.admin, http.MethodPost, "/locker/open",
			map[string]any{"location_id": c.location, "access_code": wrong, "end_user_id": "guesser"}).Status
	})
	counts := map[int]int{}
	for _, st := range statuses {
		counts[st]++
	}
	assert.Equal(t, map[int]int{http.StatusForbidden: 10, http.StatusTooManyRequests: 30}, counts)

	// The guesser waits; another end user of the same app, and calls naming no end user, are judged.
	r := c.call(t, c.admin, http.MethodPost, "/locker/open", map[string]any{"location_id": c.location, "access_code": digits, "end_user_id": "guesser"})
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "%s", r.Body)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	r = c.call(t, c.admin, http.MethodPost, "/locker/open", map[string]any{"location_id": c.location, "access_code": digits, "end_user_id": "neighbour"})
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = c.call(t, c.admin, http.MethodPost, "/locker/open", map[string]any{"location_id": c.location, "access_code": digits})
	assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, 2, c.gw1.Sim.Opens(104))

	// Right codes are not counted: many opens with the right code never reach a limit.
	for range 12 {
		r := c.call(t, c.admin, http.MethodPost, "/locker/open", map[string]any{"location_id": c.location, "access_code": digits, "end_user_id": "regular"})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
}

// GET /locker/all/access-codes as the seed writes it: the x-api-key header and nothing else
// lists the active codes of every location the key may see; location_id narrows it.
func TestAccessCodesOfAllLockersAsTheSeedWrites(t *testing.T) {
	t.Parallel()
	c := startCodeEnv(t)
	culver := fmt.Sprint(c.Seed.GatewayLocationID["GW-0002"])
	require.Eventually(t, func() bool {
		var n int
		_ = c.Store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gateway_lockers g JOIN gateways w ON w.id = g.gateway_id
			WHERE w.serial = 'GW-0002'`).Scan(&n)
		return n == 8
	}, 30*time.Second, 50*time.Millisecond, "the locker mirror of GW-0002 is filled")
	downtown := c.create(t, "A08", false, time.Now().Add(time.Hour))
	r := c.call(t, c.admin, http.MethodPost, "/locker", map[string]any{"location_id": culver, "locker_name": "3",
		"single_use": true, "expiry": time.Now().Add(time.Hour).Format(time.RFC3339)})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	atCulver := r.Map(t)
	removed := c.create(t, "B01", false, time.Now().Add(time.Hour))
	require.Equal(t, http.StatusOK, c.call(t, c.admin, http.MethodPatch, "/locker/access-code/"+removed["id"].(string), map[string]any{"status": "removed"}).Status)

	ids := func(t *testing.T, key, query string) []string {
		t.Helper()
		r := testenv.DoWithHeaders(t, http.MethodGet, c.URL+"/locker/all/access-codes"+query, map[string]string{"x-api-key": key}, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", query, r.Body)
		assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var list []map[string]any
		r.JSON(t, &list)
		out := []string{}
		for _, code := range list {
			assert.Equal(t, "active", code["status"])
			out = append(out, code["id"].(string))
		}
		return out
	}
	// The organization-wide key: both locations, newest first; the removed code is not listed.
	assert.Equal(t, []string{atCulver["id"].(string), downtown["id"].(string)}, ids(t, c.admin, ""))
	assert.Equal(t, []string{atCulver["id"].(string), downtown["id"].(string)}, ids(t, c.admin, "?location_id="), "an empty filter filters nothing")
	assert.Equal(t, []string{downtown["id"].(string)}, ids(t, c.admin, "?location_id="+c.location))
	assert.Equal(t, []string{atCulver["id"].(string)}, ids(t, c.admin, "?location_id="+culver))

	// A sub-organization key sees its sub-organization's locations only (Downtown Hub, not
	// Culver City), with the code masked: the organization-wide key made it.
	r = c.call(t, c.admin, http.MethodPost, "/auth/api-key", map[string]any{"client_id": c.Creds.ServiceProvider.ClientID,
		"client_secret": c.Creds.ServiceProvider.ClientSecret, "organization_id": c.Creds.OrganizationID, "sub_organization_id": c.Creds.SubOrganizationID})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	subKey := r.Map(t)["api_key"].(string)
	assert.Equal(t, []string{downtown["id"].(string)}, ids(t, subKey, ""))
	assert.Equal(t, http.StatusNotFound, c.call(t, subKey, http.MethodGet, "/locker/all/access-codes?location_id="+culver, nil).Status)

	// Another organization's key sees none of them; no key is refused.
	assert.Empty(t, ids(t, testenv.NewAppKey(t, c.Env, c.NewOtherOrg(t).OrgID), ""))
	assert.Equal(t, http.StatusUnauthorized, c.call(t, "", http.MethodGet, "/locker/all/access-codes", nil).Status)
}
