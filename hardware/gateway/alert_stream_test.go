package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// The alert log's stream is the database's: the same across a restart on the same file, new
// on a new file (seqs start again at 1). A cursor past the log's last seq — another log's —
// is answered at once with the stream instead of holding the long poll.
func TestAlertStreamIsTheDatabases(t *testing.T) {
	t.Parallel()
	list := func(gw *gatewaytest.Gateway, query string) gateway.AlertList {
		t.Helper()
		r := call(t, gw, http.MethodGet, "/alerts?"+query, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return decode[gateway.AlertList](t, r)
	}
	gw := gatewaytest.Start(t, gatewaytest.Options{Watch: testWatch})
	require.True(t, gw.Sim.ForceOpen(103))
	raised := alertsFrom(t, func(path string) (int, []byte) { r := call(t, gw, http.MethodGet, path, nil); return r.status, r.body }, 0, 1)
	first := list(gw, "after=0")
	require.NotEmpty(t, first.Stream)
	assert.Len(t, first.Stream, 32, "128 random bits in hex")

	gw.Restart(t)
	assert.Equal(t, first.Stream, list(gw, "after=0").Stream, "the same database, the same log")

	fresh := gatewaytest.Start(t, gatewaytest.Options{Watch: testWatch})
	other := list(fresh, "after=0")
	assert.NotEqual(t, first.Stream, other.Stream, "a new database, a new log")
	assert.Empty(t, other.Alerts)

	// The old log's cursor on the new log: at once (a wait of 25 s would outlast the client's
	// 10 s deadline), empty, the new stream.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, body, err := fresh.Do(ctx, http.MethodGet, "/alerts?wait=25&after="+strconv.FormatInt(raised[0].Seq+5, 10), nil)
	require.NoError(t, err, "answered before the wait")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	ahead := decode[gateway.AlertList](t, reply{status: resp.StatusCode, body: body})
	assert.Empty(t, ahead.Alerts)
	assert.Equal(t, other.Stream, ahead.Stream)
	assert.Equal(t, raised[0].Seq+5, ahead.Next)
}
