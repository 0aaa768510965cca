package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/store"
)

// A gateway's alert log is followed by stream: the first stream a cursor sees is adopted as
// the log it followed (its seq kept); a new stream (the gateway's database is new) starts the
// cursor where its answer says, and its seq 1 is a new alert, not the old log's seq 1.
func TestGatewayAlertStreams(t *testing.T) {
	t.Parallel()
	st, _, g := gatewayFixture(t)
	ctx := context.Background()
	lease := time.Minute
	claim := func() store.GatewayAlertWatch {
		t.Helper()
		w, err := st.ClaimGatewayAlertWatches(ctx, "a", 10, lease)
		require.NoError(t, err)
		require.Len(t, w, 1)
		return w[0]
	}
	record := func(stream string, next int64, seqs ...int64) []store.GatewayAlert {
		t.Helper()
		b := store.GatewayAlertBatch{GatewayID: g.ID, Holder: "a", Next: next, Stream: stream, Lease: lease}
		for _, seq := range seqs {
			b.Alerts = append(b.Alerts, store.GatewayAlert{Seq: seq, Kind: "controller_offline", BankID: 1, ControllerID: "CTL-1",
				At: time.Now(), Message: "silent"})
		}
		rec, err := st.RecordGatewayAlerts(ctx, b)
		require.NoError(t, err)
		return rec
	}
	release := func() { require.NoError(t, st.ReleaseGatewayAlertWatch(ctx, g.ID, "a", 0)) }

	w := claim()
	assert.Empty(t, w.Stream, "no answer yet")
	assert.Len(t, record("", 2, 1, 2), 2, "a gateway that names no stream")
	assert.Len(t, record("aaaa", 3, 3), 1, "the first stream seen is adopted")
	release()
	w = claim()
	assert.Equal(t, "aaaa", w.Stream)
	assert.EqualValues(t, 3, w.LastSeq, "adopted: the cursor kept its place")

	assert.Len(t, record("bbbb", 1, 1), 1, "the new log's seq 1 is a new alert")
	release()
	w = claim()
	assert.Equal(t, "bbbb", w.Stream)
	assert.EqualValues(t, 1, w.LastSeq, "the cursor follows the new log from its answer")
	assert.Empty(t, record("bbbb", 1, 1), "the same (gateway, stream, seq) again records nothing")
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM gateway_alerts WHERE gateway_id = $1`, g.ID).Scan(&n))
	assert.Equal(t, 4, n)
}
