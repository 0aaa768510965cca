package gatewaysync_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
	"github.com/lockernet/lockernet/internal/gatewaysync"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

type secretFor map[string]string

func (s secretFor) Open(purpose string, _ []byte) ([]byte, error) {
	if v, ok := s[purpose]; ok {
		return []byte(v), nil
	}
	return nil, errors.New("message authentication failed")
}

// fakeSync stands in for Postgres behind the gateway sync.
type fakeSync struct {
	mu      sync.Mutex
	health  []bool
	keys    []bool
	lockers []store.GatewayLocker
}

func (f *fakeSync) RecordGatewayKeys(_ context.Context, _ int64, honoured bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, honoured)
	return nil
}

func (f *fakeSync) ClaimDueGatewaySyncs(context.Context, int, time.Duration) ([]store.Gateway, error) {
	return nil, nil
}
func (f *fakeSync) ScheduleGatewaySync(context.Context, int64, time.Duration) error { return nil }
func (f *fakeSync) RecordGatewayHealth(_ context.Context, _ int64, online bool, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.health = append(f.health, online)
	return nil
}
func (f *fakeSync) SyncGatewayLockers(_ context.Context, _ int64, lockers []store.GatewayLocker) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lockers = lockers
	return nil
}
func (f *fakeSync) PruneGatewayRequests(context.Context, time.Duration) (int64, int64, error) {
	return 0, 0, nil
}

func TestGatewaySyncMirrorsLockersAndHealth(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, gatewaytest.Options{Preset: gateway.PresetOneBank})
	f := &fakeSync{}
	sync := &gatewaysync.GatewaySync{Store: f, Keyring: secretFor{keyring.GatewaySecretPurpose("GW-0002"): gw.Secret}}
	require.NoError(t, sync.SyncGateway(context.Background(), store.Gateway{ID: 2, Serial: "GW-0002", BaseURL: gw.URL}))
	assert.Equal(t, []bool{true}, f.health)
	assert.Equal(t, []bool{true}, f.keys, "the gateway honours Idempotency-Key: recorded")
	require.NoError(t, sync.SyncGateway(context.Background(), store.Gateway{ID: 2, Serial: "GW-0002", BaseURL: gw.URL, HonoursKeys: true}))
	assert.Equal(t, []bool{true}, f.keys, "recorded only when it changes")
	require.Len(t, f.lockers, 8)
	l := f.lockers[0]
	assert.Equal(t, 201, l.LockerID)
	assert.Equal(t, "1", l.Name)
	assert.Equal(t, 1, l.BankID)
	require.NotNil(t, l.LockerTypeName)
	assert.Equal(t, "small", *l.LockerTypeName)

	// A gateway that does not answer is recorded offline and its mirror is kept.
	gw.Close()
	err := sync.SyncGateway(context.Background(), store.Gateway{ID: 2, Serial: "GW-0002", BaseURL: gw.URL})
	assert.Error(t, err)
	assert.Equal(t, []bool{true, true, false}, f.health)
	assert.Len(t, f.lockers, 8)
}
