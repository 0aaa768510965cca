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

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// Every call of the user's interface document, exactly as it writes it (headers, query,
// body), answers what the document says: the document is what integrators code against.
func TestSeedCallsAsWritten(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Cloud: testenv.ScaledCloudSettings()})
	gw1, _ := e.StartDemoGatewaysMirrored(t)

	call := func(t *testing.T, method, path string, header map[string]string, body any) testenv.Response {
		t.Helper()
		return testenv.DoWithHeaders(t, method, e.URL+path, header, body)
	}

	t.Run("tower API", func(t *testing.T) {
		h := map[string]string{"Authorization": "Bearer " + e.Token("service_provider"), "accept": "application/json"}
		for _, path := range []string{"/api/v1/locations/in-area?start=34.0,-118.3&end=34.1,-118.2", "/api/v1/locations/?start=34.0,-118.3&end=34.1,-118.2"} {
			r := call(t, http.MethodGet, path, h, nil)
			require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
			var locs []map[string]any
			r.JSON(t, &locs)
			require.NotEmpty(t, locs, path)
			for _, f := range []string{"lockerAvailability", "lowLockerAvailability", "byType"} {
				assert.Contains(t, locs[0], f, path)
			}
		}
		r := call(t, http.MethodGet, "/api/v1/locations/closest?lat=34.0561&lon=-118.2366", h, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		loc := r.Map(t)
		for _, f := range []string{"id", "name", "lat", "lon", "description", "address1", "address2", "city", "state", "zip", "country",
			"notes", "accessHours", "timezone", "lockerAvailability", "lowLockerAvailability", "byType"} {
			assert.Contains(t, loc, f, "the seed's Location fields")
		}

		r = call(t, http.MethodGet, fmt.Sprintf("/api/v1/locations/%v/lockers", loc["id"]), h, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var lockers []struct {
			ID      int64  `json:"id"`
			TowerID string `json:"towerId"`
		}
		r.JSON(t, &lockers)
		require.NotEmpty(t, lockers)
		lockerPath := fmt.Sprintf("/api/v1/towers/%s/lockers/%d", lockers[0].TowerID, lockers[0].ID)

		r = call(t, http.MethodPost, lockerPath+"/reservations", h, map[string]any{"duration": 600})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		r = call(t, http.MethodPost, lockerPath+"/dropoff-locker-tokens", h, map[string]any{"duration": 300, "client_info": "order 42"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		var drop towerTokenResp
		r.JSON(t, &drop)
		withItem := true
		res, err := e.TowerSim(t).Open(context.Background(), lockers[0].TowerID,
			towersim.OpenRequest{Payload: drop.Payload, PayloadAuth: drop.PayloadAuth, CloseWithItem: &withItem})
		require.NoError(t, err)
		require.True(t, res.Opened, "refused: %v", res.Error)
		r = call(t, http.MethodPost, lockerPath+"/pickup-locker-tokens", h, map[string]any{"duration": 300, "client_info": "order 42"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)

		r = call(t, http.MethodGet, "/api/v1/users/me/assigned-lockers", h, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Contains(t, string(r.Body), fmt.Sprintf(`"id":%d`, lockers[0].ID))
	})

	t.Run("app engine API", func(t *testing.T) {
		h := map[string]string{"x-api-key": e.Creds.AppEngineAPIKey}
		r := call(t, http.MethodPost, "/locker", h, map[string]any{"location_id": fmt.Sprint(gw1.LocationID), "locker_name": "A03",
			"single_use": true, "expiry": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		code := r.Map(t)

		r = call(t, http.MethodGet, "/locker/all/access-codes", h, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Contains(t, string(r.Body), code["id"].(string))

		// The ten parameters the seed marks required, all present, the filters empty.
		q := "type=&order_reference=&pickup_code=&locker_number=&tower_name=&location=&city=&pin_code=&page_size=20&page_number=1"
		r = call(t, http.MethodGet, "/dropoff/organization/transactions?"+q, h, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		page := r.Map(t)
		assert.Contains(t, page, "data")
	})

	t.Run("gateway cloud API", func(t *testing.T) {
		base := "/api/customer/v1"
		for _, h := range []map[string]string{{"X-API-Key": e.GatewayKey()}, {"Authorization": "Bearer " + e.GatewayKey()}} {
			for _, path := range []string{"/", "/me", "/locations"} {
				r := call(t, http.MethodGet, base+path, h, nil)
				require.Equal(t, http.StatusOK, r.Status, "%v %s: %s", h, path, r.Body)
				if path == "/" {
					continue // the version probe needs no key, so it counts against none
				}
				assert.Equal(t, "120", r.Header.Get("X-RateLimit-Limit"), path)
				assert.NotEmpty(t, r.Header.Get("X-RateLimit-Remaining"), path)
				assert.NotEmpty(t, r.Header.Get("X-RateLimit-Reset"), path)
			}
		}
		h := map[string]string{"X-API-Key": e.GatewayKey()}
		lockers := fmt.Sprintf("%s/locations/%d/lockers", base, gw1.LocationID)

		// Within the wait: the gateway's own response, with the proxy headers.
		r := call(t, http.MethodGet, lockers, h, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		for _, name := range []string{"X-Request-Id", "X-Gateway-Id", "X-Request-Duration-Ms"} {
			assert.NotEmpty(t, r.Header.Get(name), name)
		}
		assert.Equal(t, gw1.Serial, r.Header.Get("X-Gateway-Id"))

		// Prefer: respond-async → 202, Location; the poll GET /requests/{id} reaches the
		// gateway's answer. Prefer: wait above 30 is clamped, not refused.
		h["Prefer"] = "respond-async"
		r = call(t, http.MethodGet, lockers, h, nil)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		loc := r.Header.Get("Location")
		require.True(t, strings.HasPrefix(loc, base+"/requests/"), loc)
		h["Prefer"] = "wait=60"
		r = call(t, http.MethodGet, loc, h, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		assert.Equal(t, "completed", r.Header.Get("X-Request-State"))
		delete(h, "Prefer")

		// Idempotency-Key: the retry answers the first attempt's response, marked replayed,
		// and creates no second transaction.
		h["Idempotency-Key"] = uuid.NewString()
		create := fmt.Sprintf("%s/locations/%d/transactions", base, gw1.LocationID)
		first := call(t, http.MethodPost, create, h, map[string]any{"lockerTypeId": 1})
		require.Equal(t, http.StatusCreated, first.Status, "%s", first.Body)
		again := call(t, http.MethodPost, create, h, map[string]any{"lockerTypeId": 1})
		require.Equal(t, http.StatusCreated, again.Status, "%s", again.Body)
		assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		assert.JSONEq(t, string(first.Body), string(again.Body))
	})
}
