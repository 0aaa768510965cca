package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// keyed sends an authenticated request with an Idempotency-Key; a cancelled ctx leaves
// before the answer (reply status 0).
func keyed(ctx context.Context, t *testing.T, gw *gatewaytest.Gateway, method, path, key, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, gw.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+gw.Secret)
	req.Header.Set("Idempotency-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

func TestIdempotencyKeyOpensOnce(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})

	first := keyed(t.Context(), t, gw, http.MethodPost, "/lockers/205/open", "req-1", "")
	require.Equal(t, http.StatusOK, first.status, "body: %s", first.body)
	assert.Equal(t, gateway.IdempotencyKeysHonoured, first.header.Get(gateway.IdempotencyKeysHeader), "the gateway says it honours keys")
	assert.Empty(t, first.header.Get("Idempotent-Replayed"))

	again := keyed(t.Context(), t, gw, http.MethodPost, "/lockers/205/open", "req-1", "")
	require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	assert.Equal(t, string(first.body), string(again.body), "the first execution's answer, byte for byte")
	assert.Equal(t, first.header.Get("Content-Type"), again.header.Get("Content-Type"))
	assert.Equal(t, 1, gw.Sim.Opens(205), "one door actuation for the key")

	// Kept across a restart of the gateway.
	gw.Restart(t)
	again = keyed(t.Context(), t, gw, http.MethodPost, "/lockers/205/open", "req-1", "")
	require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
	assert.Equal(t, string(first.body), string(again.body))
	assert.Equal(t, 1, gw.Sim.Opens(205))

	// Another key is another open; no key at all is as ever.
	require.Equal(t, http.StatusOK, keyed(t.Context(), t, gw, http.MethodPost, "/lockers/205/open", "req-2", "").status)
	require.Equal(t, http.StatusOK, call(t, gw, http.MethodPost, "/lockers/205/open", nil).status)
	assert.Equal(t, 3, gw.Sim.Opens(205))
}

func TestIdempotencyKeyRefusals(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})
	require.Equal(t, http.StatusOK, keyed(t.Context(), t, gw, http.MethodPost, "/lockers/205/open", "k", "").status)

	// The same key for another request: refused, nothing done.
	requireError(t, keyed(t.Context(), t, gw, http.MethodPost, "/lockers/206/open", "k", ""), http.StatusUnprocessableEntity,
		gateway.CodeIdempotencyKeyReused)
	assert.Zero(t, gw.Sim.Opens(206))
	requireError(t, keyed(t.Context(), t, gw, http.MethodPatch, "/lockers/205", "k", `{"outOfService":true}`), http.StatusUnprocessableEntity,
		gateway.CodeIdempotencyKeyReused)

	// Keys are printable ASCII, 1..255.
	for _, bad := range []string{strings.Repeat("a", 256), "tab\there"} {
		requireError(t, keyed(t.Context(), t, gw, http.MethodPost, "/lockers/206/open", bad, ""), http.StatusUnprocessableEntity,
			gateway.CodeValidation)
	}
	assert.Zero(t, gw.Sim.Opens(206))

	// A read ignores the key.
	r := keyed(t.Context(), t, gw, http.MethodGet, "/lockers/205", "k", "")
	assert.Equal(t, http.StatusOK, r.status)
	assert.Empty(t, r.header.Get("Idempotent-Replayed"))
}

// A caller that leaves mid-open does not leave the door half done: the open goes on to its
// end, and the caller's repeat (the cloud's re-send after a crash) waits for it and gets its
// answer; the door moved once.
func TestIdempotencyKeyCarriesAnOpenThroughWhenTheCallerLeaves(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})
	require.NoError(t, gw.Sim.SetFaults(simctl.Faults{Mode: simctl.ModeControllerSlow, DelayMs: 200}))

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	left := keyed(ctx, t, gw, http.MethodPost, "/lockers/205/open", "crash-1", "")
	assert.Zero(t, left.status, "the caller left before the answer")

	again := keyed(t.Context(), t, gw, http.MethodPost, "/lockers/205/open", "crash-1", "")
	require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	assert.True(t, bytes.Contains(again.body, []byte(`"doorOpen":true`)), "body: %s", again.body)
	assert.Equal(t, 1, gw.Sim.Opens(205), "the door moved once")
}
