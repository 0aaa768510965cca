package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/apiserver"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

const cloudBase = "/api/customer/v1"

// cloud is a client of the gateway cloud API for one key.
type cloudClient struct {
	t   *testing.T
	url string // base URL of an apiserver
	key string
}

func newCloudClient(t *testing.T, baseURL, key string) *cloudClient {
	return &cloudClient{t: t, url: baseURL + cloudBase, key: key}
}

// do sends a request; body may be nil, a string, []byte or a value to encode as JSON.
// header adds headers (e.g. Prefer, Idempotency-Key). It is safe in goroutines: a transport
// failure is reported with Errorf (never FailNow) and answers status 0.
func (c *cloudClient) do(method, path string, body any, header ...string) testenv.Response {
	c.t.Helper()
	h := http.Header{}
	if c.key != "" {
		h.Set("X-API-Key", c.key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	r, err := testenv.Exchange(method, c.url+path, h, body)
	if err != nil {
		c.t.Errorf("%v", err)
	}
	return r
}

func locPath(g *testenv.Gateway, rest string) string {
	return fmt.Sprintf("/locations/%d%s", g.LocationID, rest)
}

// requireCloudError checks the surface's error body and returns it.
func requireCloudError(t *testing.T, r testenv.Response, status int, code string) map[string]any {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	m := r.Map(t)
	assert.Equal(t, code, m["error"], "body: %s", r.Body)
	assert.NotEmpty(t, m["message"])
	assert.Contains(t, m, "requestId")
	assert.Contains(t, m, "details")
	if tsv, ok := m["timestamp"].(string); assert.True(t, ok) {
		assert.Regexp(t, timestampRE, tsv)
	}
	return m
}

// poll polls a request until it is terminal (its X-Request-State is not pending or
// dispatched) and returns the final answer.
func (c *cloudClient) poll(id string) testenv.Response {
	c.t.Helper()
	var last testenv.Response
	require.Eventually(c.t, func() bool {
		last = c.do(http.MethodGet, "/requests/"+id, nil, "Prefer", "wait=5")
		st := last.Header.Get("X-Request-State")
		return st != "pending" && st != "dispatched" && st != ""
	}, 90*time.Second, 50*time.Millisecond)
	return last
}

// simStats reads a gateway simulator's counters over its control API.
func simStats(t *testing.T, g *testenv.Gateway) simctl.Stats {
	t.Helper()
	resp, err := http.Get(g.SimURL + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st simctl.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// setFaults switches a simulator's fault mode over its control API, as a dev would.
func setFaults(t *testing.T, g *testenv.Gateway, f simctl.Faults) {
	t.Helper()
	b, err := json.Marshal(f)
	require.NoError(t, err)
	resp, err := http.Post(g.SimURL+"/sim/faults", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// faultUntilEnd puts the gateway's simulator in fault mode f until the (sub)test ends.
func faultUntilEnd(t *testing.T, g *testenv.Gateway, f simctl.Faults) {
	t.Helper()
	setFaults(t, g, f)
	t.Cleanup(func() { setFaults(t, g, simctl.Faults{Mode: simctl.ModeNone}) })
}

// direct calls a gateway's local API directly (what the cloud should pass through).
func direct(t *testing.T, g *testenv.Gateway, method, path string, body any) (int, []byte, http.Header) {
	t.Helper()
	resp, b, err := g.Do(context.Background(), method, path, body)
	require.NoError(t, err)
	return resp.StatusCode, b, resp.Header
}

// startCloudEnv is a system with the scaled gateway settings and the two demo gateways.
func startCloudEnv(t *testing.T) (*testenv.Env, *testenv.Gateway, *testenv.Gateway) {
	t.Helper()
	return startCloudEnvWith(t, testenv.ScaledCloudSettings())
}

// startCloudEnvWith is startCloudEnv with the cloud API's settings given.
func startCloudEnvWith(t *testing.T, settings apiserver.CloudSettings) (*testenv.Env, *testenv.Gateway, *testenv.Gateway) {
	t.Helper()
	e := testenv.Start(t, testenv.Options{Cloud: settings})
	e.RunGatewayCloud(t)
	gw1, gw2 := e.StartDemoGateways(t)
	return e, gw1, gw2
}
