package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/store"
)

// With every connection of the pool busy, a request is answered 503 + Retry-After within
// the acquire timeout, on the tower API and on the gateway cloud API, instead of waiting
// for a connection until the client gives up.
func TestBusyPoolAnswers503(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Pool: store.Options{MaxConns: 3, AcquireTimeout: 300 * time.Millisecond}})
	token := e.Token()
	path := fmt.Sprintf("/api/v1/locations/%d/lockers", e.Creds.Towers[0].LocationID)
	require.Equal(t, http.StatusOK, e.Do(http.MethodGet, path, token, nil).Status, "served while the pool has room")

	ctx := context.Background()
	var held []*pgxpool.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Release()
		}
	})
	for range e.Store.Pool().Config().MaxConns {
		c, err := e.Store.Pool().Acquire(ctx)
		require.NoError(t, err)
		held = append(held, c)
	}

	for name, call := range map[string]func() testenv.Response{
		"tower API": func() testenv.Response { return e.Do(http.MethodGet, path, token, nil) },
		"gateway cloud API": func() testenv.Response {
			return testenv.DoWithHeaders(t, http.MethodGet, e.URL+"/api/customer/v1/locations", map[string]string{"X-API-Key": e.GatewayKey()}, nil)
		},
	} {
		t0 := time.Now()
		r := call()
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s: %s", name, r.Body)
		assert.NotEmpty(t, r.Header.Get("Retry-After"), name)
		assert.Less(t, time.Since(t0), 10*time.Second, "%s: answered, not left waiting", name)
	}
}
