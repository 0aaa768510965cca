package apiserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// sameAnswer checks that a replay answers exactly what the original did.
func sameAnswer(t *testing.T, want, got testenv.Response) {
	t.Helper()
	assert.Equal(t, want.Status, got.Status)
	assert.Equal(t, string(want.Body), string(got.Body))
	for _, h := range []string{"X-Request-Id", "X-Gateway-Id", "X-Request-State", "Content-Type", "Location", "Retry-After"} {
		assert.Equal(t, want.Header.Get(h), got.Header.Get(h), h)
	}
}

func TestCloudIdempotentReplays(t *testing.T) {
	t.Parallel()
	e, gw1, gw2 := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())

	t.Run("replay while pending, then after completion: one door actuation", func(t *testing.T) {
		faultUntilEnd(t, gw1, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 1500})
		key := uuid.NewString()
		first := c.do(http.MethodPost, locPath(gw1, "/lockers/104/open"), nil, "Idempotency-Key", key, "Prefer", "respond-async")
		require.Equal(t, http.StatusAccepted, first.Status, "body: %s", first.Body)
		assert.Empty(t, first.Header.Get("Idempotent-Replayed"))

		pending := c.do(http.MethodPost, locPath(gw1, "/lockers/104/open"), nil, "Idempotency-Key", key, "Prefer", "respond-async")
		require.Equal(t, http.StatusAccepted, pending.Status, "body: %s", pending.Body)
		assert.Equal(t, "true", pending.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.Header.Get("Location"), pending.Header.Get("Location"))
		assert.Equal(t, first.Header.Get("X-Request-Id"), pending.Header.Get("X-Request-Id"))

		final := c.poll(first.Header.Get("X-Request-Id"))
		require.Equal(t, http.StatusOK, final.Status)

		// After completion the replay is the outcome itself, even with respond-async.
		for _, prefer := range []string{"respond-async", "wait=0", "wait=30"} {
			done := c.do(http.MethodPost, locPath(gw1, "/lockers/104/open"), nil, "Idempotency-Key", key, "Prefer", prefer)
			assert.Equal(t, "true", done.Header.Get("Idempotent-Replayed"))
			sameAnswer(t, final, done)
		}
		assert.Equal(t, 1, simStats(t, gw1).Opens["104"], "the door opened once")
	})

	t.Run("a create replayed after completion: one transaction", func(t *testing.T) {
		key := uuid.NewString()
		body := `{"lockerTypeId": 3}`
		first := c.do(http.MethodPost, locPath(gw2, "/transactions"), body, "Idempotency-Key", key)
		require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
		again := c.do(http.MethodPost, locPath(gw2, "/transactions"), body, "Idempotency-Key", key)
		assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		sameAnswer(t, first, again)
		r := c.do(http.MethodGet, locPath(gw2, "/transactions"), nil)
		require.Equal(t, http.StatusOK, r.Status)
		var txs []map[string]any
		r.JSON(t, &txs)
		assert.Len(t, txs, 1)
	})

	t.Run("a failure is replayed byte for byte", func(t *testing.T) {
		faultUntilEnd(t, gw2, simctl.Faults{Mode: simctl.ModeHTTP500})
		key := uuid.NewString()
		first := c.do(http.MethodPost, locPath(gw2, "/lockers/207/open"), nil, "Idempotency-Key", key)
		requireCloudError(t, first, http.StatusBadGateway, "GATEWAY_REJECTED")
		setFaults(t, gw2, simctl.Faults{Mode: simctl.ModeNone})
		again := c.do(http.MethodPost, locPath(gw2, "/lockers/207/open"), nil, "Idempotency-Key", key)
		assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		sameAnswer(t, first, again)
		assert.Zero(t, simStats(t, gw2).Opens["207"], "the replay sent nothing")
	})

	t.Run("the same key with another request is 422", func(t *testing.T) {
		key := uuid.NewString()
		first := c.do(http.MethodPatch, locPath(gw2, "/lockers/208"), `{"outOfService": true}`, "Idempotency-Key", key)
		require.Equal(t, http.StatusOK, first.Status, "body: %s", first.Body)
		for _, other := range []struct {
			method, path string
			body         any
		}{
			{http.MethodPatch, locPath(gw2, "/lockers/208"), `{"outOfService": false}`},
			{http.MethodPatch, locPath(gw2, "/lockers/208"), `{"outOfService":true}`}, // other bytes
			{http.MethodPatch, locPath(gw2, "/lockers/201"), `{"outOfService": true}`},
			{http.MethodPost, locPath(gw2, "/lockers/208/open"), nil},
		} {
			r := c.do(other.method, other.path, other.body, "Idempotency-Key", key)
			m := requireCloudError(t, r, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
			assert.Nil(t, m["requestId"])
			assert.Empty(t, r.Header.Get("X-Request-Id"), "no request was made")
		}
		assert.Zero(t, simStats(t, gw2).Opens["208"])
	})

	t.Run("malformed keys are 422 and not stored", func(t *testing.T) {
		for _, key := range []string{strings.Repeat("k", 256), "tab\tkey"} {
			r := c.do(http.MethodPost, locPath(gw2, "/lockers/201/open"), nil, "Idempotency-Key", key)
			requireCloudError(t, r, http.StatusUnprocessableEntity, "VALIDATION_FAILED")
		}
		assert.Zero(t, simStats(t, gw2).Opens["201"])
	})
}

func TestCloudConcurrentDuplicatesActOnce(t *testing.T) {
	t.Parallel()
	e, gw1, _ := startCloudEnv(t)
	c := newCloudClient(t, e.URL, e.GatewayKey())
	setFaults(t, gw1, simctl.Faults{Mode: simctl.ModeSlow, DelayMs: 300})

	const n = 50
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"open", http.MethodPost, locPath(gw1, "/lockers/107/open"), nil},
		{"create", http.MethodPost, locPath(gw1, "/transactions"), `{"bankTypeId": 2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := uuid.NewString()
			answers := make([]testenv.Response, n)
			testenv.AtOnce(n, func(i int) {
				answers[i] = c.do(tc.method, tc.path, tc.body, "Idempotency-Key", key, "Prefer", "wait=30")
			})

			originals := 0
			for _, r := range answers {
				require.True(t, r.Status >= 200 && r.Status < 300, "status %d: %s", r.Status, r.Body)
				if r.Header.Get("Idempotent-Replayed") == "" {
					originals++
				}
				sameAnswer(t, answers[0], r)
			}
			assert.Equal(t, 1, originals, "exactly one request is the original")
		})
	}
	assert.Equal(t, 1, simStats(t, gw1).Opens["107"], "one door actuation")
	r := c.do(http.MethodGet, locPath(gw1, "/transactions"), nil)
	var txs []map[string]any
	r.JSON(t, &txs)
	assert.Len(t, txs, 1, "one transaction")
}
