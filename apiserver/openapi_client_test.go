package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/apiclient/lockernet"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

// A client generated from the committed docs/openapi.yaml (internal/apiclient) runs one flow
// per surface against the real server: the tower API's reservation and drop-off token, the
// app engine's access code opening a gateway locker, and the gateway cloud API's transaction
// through a gateway, the 202 and the poll included. Every answer decodes into the document's
// types (and the env's contract check validates each against the served document).
func TestGeneratedClientFlows(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{Cloud: testenv.ScaledCloudSettings()})
	gw1, _ := e.StartDemoGatewaysMirrored(t)
	header := func(name, value string) lockernet.ClientOption {
		return lockernet.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set(name, value)
			return nil
		})
	}
	ctx := context.Background()

	t.Run("tower API", func(t *testing.T) {
		anon, err := lockernet.NewClientWithResponses(e.URL)
		require.NoError(t, err)
		id, secret, scope := e.Creds.ServiceProvider.ClientID, e.Creds.ServiceProvider.ClientSecret, "service_provider"
		tok, err := anon.PostOauthTokenWithFormdataBodyWithResponse(ctx, &lockernet.PostOauthTokenParams{},
			lockernet.TokenRequest{GrantType: "client_credentials", ClientId: &id, ClientSecret: &secret, Scope: &scope})
		require.NoError(t, err)
		require.NotNil(t, tok.JSON200, "%d %s", tok.StatusCode(), tok.Body)

		c, err := lockernet.NewClientWithResponses(e.URL, header("Authorization", "Bearer "+tok.JSON200.AccessToken))
		require.NoError(t, err)
		locs, err := c.GetLocationsInAreaWithResponse(ctx, &lockernet.GetLocationsInAreaParams{Start: "34.0,-118.3", End: "34.1,-118.2"})
		require.NoError(t, err)
		require.NotNil(t, locs.JSON200, "%d %s", locs.StatusCode(), locs.Body)
		require.NotEmpty(t, *locs.JSON200)
		loc := (*locs.JSON200)[0]
		assert.Equal(t, "Union Station", loc.Name)

		lockers, err := c.ListLocationLockersWithResponse(ctx, loc.Id)
		require.NoError(t, err)
		require.NotNil(t, lockers.JSON200, "%d %s", lockers.StatusCode(), lockers.Body)
		require.NotEmpty(t, *lockers.JSON200)
		locker := (*lockers.JSON200)[0]

		res, err := c.CreateReservationWithResponse(ctx, locker.TowerId, locker.Id, lockernet.CreateReservationRequest{Duration: 600})
		require.NoError(t, err)
		require.NotNil(t, res.JSON201, "%d %s", res.StatusCode(), res.Body)
		info := "order 42"
		drop, err := c.CreateDropoffTokenWithResponse(ctx, locker.TowerId, locker.Id, lockernet.LockerTokenRequest{Duration: 300, ClientInfo: &info})
		require.NoError(t, err)
		require.NotNil(t, drop.JSON201, "%d %s", drop.StatusCode(), drop.Body)
		assert.EqualValues(t, "dropoff", drop.JSON201.Type)

		mine, err := c.ListAssignedLockersWithResponse(ctx)
		require.NoError(t, err)
		require.NotNil(t, mine.JSON200, "%d %s", mine.StatusCode(), mine.Body)
		require.Len(t, *mine.JSON200, 1)
		assert.Equal(t, locker.Id, (*mine.JSON200)[0].Id)
	})

	t.Run("app engine API", func(t *testing.T) {
		c, err := lockernet.NewClientWithResponses(e.URL, header("x-api-key", e.Creds.AppEngineAPIKey))
		require.NoError(t, err)
		var loc lockernet.CreateAccessCodeRequest_LocationId
		require.NoError(t, loc.FromCreateAccessCodeRequestLocationId1(fmt.Sprint(gw1.LocationID)))
		created, err := c.CreateAccessCodeWithResponse(ctx, lockernet.CreateAccessCodeRequest{LocationId: loc, LockerName: "A02",
			SingleUse: true, Expiry: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		require.NoError(t, err)
		require.NotNil(t, created.JSON200, "%d %s", created.StatusCode(), created.Body)
		code := created.JSON200

		list, err := c.ListLocationAccessCodesWithResponse(ctx, &lockernet.ListLocationAccessCodesParams{})
		require.NoError(t, err)
		require.NotNil(t, list.JSON200, "%d %s", list.StatusCode(), list.Body)
		require.Len(t, *list.JSON200, 1)
		assert.Equal(t, code.Id, (*list.JSON200)[0].Id)

		var at lockernet.OpenWithCodeRequest_LocationId
		require.NoError(t, at.FromOpenWithCodeRequestLocationId0(gw1.LocationID))
		opened, err := c.OpenLockerWithCodeWithResponse(ctx, lockernet.OpenWithCodeRequest{LocationId: at, AccessCode: code.AccessCode})
		require.NoError(t, err)
		require.NotNil(t, opened.JSON200, "%d %s", opened.StatusCode(), opened.Body)
		assert.True(t, opened.JSON200.DoorOpen)
		assert.Equal(t, "A02", opened.JSON200.LockerName)

		again, err := c.OpenLockerWithCodeWithResponse(ctx, lockernet.OpenWithCodeRequest{LocationId: at, AccessCode: code.AccessCode})
		require.NoError(t, err)
		require.NotNil(t, again.ApplicationproblemJSONDefault, "%d %s", again.StatusCode(), again.Body)
		assert.Equal(t, http.StatusForbidden, again.StatusCode(), "a single-use code opens once")

		txs, err := c.ListOrganizationTransactionsWithResponse(ctx, &lockernet.ListOrganizationTransactionsParams{})
		require.NoError(t, err)
		require.NotNil(t, txs.JSON200, "%d %s", txs.StatusCode(), txs.Body)
		assert.NotEmpty(t, txs.JSON200.Data)
	})

	t.Run("gateway cloud API", func(t *testing.T) {
		c, err := lockernet.NewClientWithResponses(e.URL, header("X-API-Key", e.GatewayKey()))
		require.NoError(t, err)
		meta, err := c.CustomerGetMetaWithResponse(ctx)
		require.NoError(t, err)
		require.NotNil(t, meta.JSON200, "%d %s", meta.StatusCode(), meta.Body)
		assert.Nil(t, meta.JSON200.Deprecation, "null until v1 is deprecated")
		me, err := c.CustomerGetMeWithResponse(ctx)
		require.NoError(t, err)
		require.NotNil(t, me.JSON200, "%d %s", me.StatusCode(), me.Body)
		assert.EqualValues(t, 120, me.JSON200.RateLimit.Limit)
		require.NotNil(t, me.Headers200)
		require.NotNil(t, me.Headers200.XRateLimitLimit)
		assert.EqualValues(t, 120, *me.Headers200.XRateLimitLimit)
		locs, err := c.CustomerListLocationsWithResponse(ctx)
		require.NoError(t, err)
		require.NotNil(t, locs.JSON200, "%d %s", locs.StatusCode(), locs.Body)
		assert.NotEmpty(t, locs.JSON200.Data)

		lockers, err := c.CustomerListLockersWithResponse(ctx, gw1.LocationID, &lockernet.CustomerListLockersParams{})
		require.NoError(t, err)
		require.NotNil(t, lockers.JSON200, "%d %s", lockers.StatusCode(), lockers.Body)
		assert.Len(t, *lockers.JSON200, 16)
		require.NotNil(t, lockers.Headers200)
		require.NotNil(t, lockers.Headers200.XGatewayId)
		assert.Equal(t, "GW-0001", *lockers.Headers200.XGatewayId)

		// respond-async: the 202 and its PendingRequest, then the poll's 200 is the gateway's
		// answer once the request completed.
		async := "respond-async"
		pending, err := c.CustomerListLockersWithResponse(ctx, gw1.LocationID, &lockernet.CustomerListLockersParams{Prefer: &async})
		require.NoError(t, err)
		require.NotNil(t, pending.JSON202, "%d %s", pending.StatusCode(), pending.Body)
		wait := "wait=10"
		polled, err := c.CustomerGetRequestWithResponse(ctx, pending.JSON202.Id.String(), &lockernet.CustomerGetRequestParams{Prefer: &wait})
		require.NoError(t, err)
		require.NotNil(t, polled.JSON200, "%d %s", polled.StatusCode(), polled.Body)
		require.NotNil(t, polled.Headers200)
		require.NotNil(t, polled.Headers200.XRequestState)
		assert.EqualValues(t, "completed", *polled.Headers200.XRequestState)

		txID, key := "generated-client-tx", uuid.NewString()
		var txRef lockernet.CreateTransactionBody_TransactionId
		require.NoError(t, txRef.FromCreateTransactionBodyTransactionId0(txID))
		var lockerType lockernet.CreateTransactionBody_LockerTypeId
		require.NoError(t, lockerType.FromCreateTransactionBodyLockerTypeId0(1))
		created, err := c.CustomerCreateTransactionWithResponse(ctx, gw1.LocationID, &lockernet.CustomerCreateTransactionParams{IdempotencyKey: &key},
			lockernet.CreateTransactionBody{TransactionId: &txRef, LockerTypeId: &lockerType})
		require.NoError(t, err)
		require.NotNil(t, created.JSON201, "%d %s", created.StatusCode(), created.Body)
		assert.Equal(t, txID, created.JSON201.TransactionId)

		opened, err := c.CustomerOpenTransactionWithResponse(ctx, gw1.LocationID, txID, &lockernet.CustomerOpenTransactionParams{})
		require.NoError(t, err)
		require.NotNil(t, opened.JSON200, "%d %s", opened.StatusCode(), opened.Body)
		assert.True(t, opened.JSON200.DoorOpen)
		assert.Equal(t, created.JSON201.LockerId, opened.JSON200.LockerId)

		released, err := c.CustomerReleaseTransactionWithResponse(ctx, gw1.LocationID, txID, &lockernet.CustomerReleaseTransactionParams{})
		require.NoError(t, err)
		assert.Equal(t, http.StatusNoContent, released.StatusCode(), "%s", released.Body)

		missing, err := c.CustomerGetRequestWithResponse(ctx, uuid.NewString(), &lockernet.CustomerGetRequestParams{})
		require.NoError(t, err)
		require.NotNil(t, missing.JSON404, "%d %s", missing.StatusCode(), missing.Body)
		cloudErr, err := missing.JSON404.AsError()
		require.NoError(t, err)
		assert.Equal(t, "REQUEST_NOT_FOUND", cloudErr.Error)
	})
}
