package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// The alert leases: one holder at a time claims a gateway; an answer recorded by a holder
// that lost the lease records nothing (nor moves the cursor); an alert recorded twice (same gateway and seq) is
// stored once; a released watch is claimed again after its pause; a gateway known offline is
// not claimed.
func TestGatewayAlertLeases(t *testing.T) {
	t.Parallel()
	st, _, g := gatewayFixture(t)
	ctx := context.Background()
	lease := time.Minute

	a, err := st.ClaimGatewayAlertWatches(ctx, "a", 10, lease)
	require.NoError(t, err)
	require.Len(t, a, 1)
	assert.Equal(t, g.ID, a[0].Gateway.ID)
	assert.Zero(t, a[0].LastSeq)
	b, err := st.ClaimGatewayAlertWatches(ctx, "b", 10, lease)
	require.NoError(t, err)
	assert.Empty(t, b, "leased to a")

	locker, name := 101, "A01"
	alert := store.GatewayAlert{Seq: 1, Kind: "forced_open", LockerID: &locker, LockerName: &name, BankID: 1, ControllerID: "CTL-1",
		At: time.Now(), Message: "forced"}
	_, err = st.RecordGatewayAlerts(ctx, store.GatewayAlertBatch{GatewayID: g.ID, Holder: "b", Next: 1, Lease: lease,
		Alerts: []store.GatewayAlert{alert}})
	require.ErrorIs(t, err, store.ErrLeaseLost)
	rec, err := st.RecordGatewayAlerts(ctx, store.GatewayAlertBatch{GatewayID: g.ID, Holder: "a", Next: 1, Lease: lease,
		Alerts: []store.GatewayAlert{alert}})
	require.NoError(t, err)
	assert.Len(t, rec, 1)
	rec, err = st.RecordGatewayAlerts(ctx, store.GatewayAlertBatch{GatewayID: g.ID, Holder: "a", Next: 1, Lease: lease,
		Alerts: []store.GatewayAlert{alert}})
	require.NoError(t, err)
	assert.Empty(t, rec, "the same (gateway, seq) again records nothing")
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM gateway_alerts WHERE gateway_id = $1`, g.ID).Scan(&n))
	assert.Equal(t, 1, n)

	unknown := alert
	unknown.Seq, unknown.Kind = 2, "door_on_fire"
	rec, err = st.RecordGatewayAlerts(ctx, store.GatewayAlertBatch{GatewayID: g.ID, Holder: "a", Next: 2, Lease: lease,
		Alerts: []store.GatewayAlert{unknown}})
	require.NoError(t, err)
	assert.Empty(t, rec, "a kind this cloud does not know is passed over, and the cursor moves past it")

	require.NoError(t, st.ReleaseGatewayAlertWatch(ctx, g.ID, "a", 0))
	b, err = st.ClaimGatewayAlertWatches(ctx, "b", 10, lease)
	require.NoError(t, err)
	require.Len(t, b, 1)
	assert.EqualValues(t, 2, b[0].LastSeq, "the cursor moved with the recorded answers, not with the refused one")

	require.NoError(t, st.ReleaseGatewayAlertWatch(ctx, g.ID, "b", 0))
	require.NoError(t, st.RecordGatewayHealth(ctx, g.ID, false, "down"))
	b, err = st.ClaimGatewayAlertWatches(ctx, "b", 10, lease)
	require.NoError(t, err)
	assert.Empty(t, b, "an offline gateway is not polled")
}
