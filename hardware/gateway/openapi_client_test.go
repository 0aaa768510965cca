package gateway_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/apiclient/gatewaylocal"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// A client generated from the committed docs/openapi-gateway.yaml (internal/apiclient) runs a
// transaction's whole life against a real gateway: every answer decodes into the document's
// types, and the contract check of gatewaytest validates each against the served document.
func TestGeneratedClientFlow(t *testing.T) {
	gw := gatewaytest.Start(t, gatewaytest.Options{})
	bearer := gatewaylocal.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+gw.Secret)
		return nil
	})
	c, err := gatewaylocal.NewClientWithResponses(gw.URL, bearer)
	require.NoError(t, err)
	ctx := t.Context()

	health, err := c.HealthCheckWithResponse(ctx)
	require.NoError(t, err)
	require.NotNil(t, health.JSON200, "%d %s", health.StatusCode(), health.Body)
	assert.Equal(t, gatewaylocal.HealthStatus("ok"), health.JSON200.Status)

	lockers, err := c.ListLockersWithResponse(ctx)
	require.NoError(t, err)
	require.NotNil(t, lockers.JSON200)
	assert.Len(t, *lockers.JSON200, 16)

	typeID, txID := int64(1), "generated-client-1"
	created, err := c.CreateTransactionWithResponse(ctx, &gatewaylocal.CreateTransactionParams{},
		gatewaylocal.CreateTransactionBody{TransactionId: &txID, LockerTypeId: &typeID})
	require.NoError(t, err)
	require.NotNil(t, created.JSON201, "%d %s", created.StatusCode(), created.Body)
	assert.Equal(t, txID, created.JSON201.TransactionId)
	again, err := c.CreateTransactionWithResponse(ctx, &gatewaylocal.CreateTransactionParams{},
		gatewaylocal.CreateTransactionBody{TransactionId: &txID, LockerTypeId: &typeID})
	require.NoError(t, err)
	require.NotNil(t, again.JSON409, "%d %s", again.StatusCode(), again.Body)
	assert.Equal(t, "TRANSACTION_EXISTS", again.JSON409.Error)
	assert.Equal(t, created.JSON201.LockerId, again.JSON409.LockerId, "the 409 carries the existing transaction")

	opened, err := c.OpenTransactionWithResponse(ctx, txID, &gatewaylocal.OpenTransactionParams{})
	require.NoError(t, err)
	require.NotNil(t, opened.JSON200, "%d %s", opened.StatusCode(), opened.Body)
	assert.True(t, opened.JSON200.Success)
	assert.True(t, opened.JSON200.DoorOpen)
	assert.Equal(t, created.JSON201.LockerId, opened.JSON200.LockerId)

	released, err := c.ReleaseTransactionWithResponse(ctx, txID, &gatewaylocal.ReleaseTransactionParams{})
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, released.StatusCode())
	gone, err := c.GetTransactionWithResponse(ctx, txID)
	require.NoError(t, err)
	require.NotNil(t, gone.JSONDefault, "%d %s", gone.StatusCode(), gone.Body)
	assert.Equal(t, http.StatusNotFound, gone.StatusCode())
	assert.Equal(t, "TRANSACTION_NOT_FOUND", gone.JSONDefault.Error)

	limit := 1
	logs, err := c.SystemLogsWithResponse(ctx, &gatewaylocal.SystemLogsParams{Limit: &limit})
	require.NoError(t, err)
	require.NotNil(t, logs.JSON200, "%d %s", logs.StatusCode(), logs.Body)
	require.NotNil(t, logs.Headers200)
	if assert.NotNil(t, logs.Headers200.XResponseTruncated, "more than one entry matched") {
		assert.Equal(t, "true", *logs.Headers200.XResponseTruncated)
	}
	assert.Empty(t, gw.Contract.Violations())
	assert.Contains(t, gw.Contract.Checked(), "POST /transactions/{transactionId}/open")
}
