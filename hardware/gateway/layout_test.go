package gateway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl/simctl"
)

func TestPresets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		gatewayID string
		lockers   []int
		names     []string
		banks     int
	}{
		{name: gateway.PresetTwoBanks, gatewayID: "GW-0001", banks: 2,
			lockers: []int{101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116},
			names:   []string{"A01", "A02", "A03", "A04", "A05", "A06", "A07", "A08", "B01", "B02", "B03", "B04", "B05", "B06", "B07", "B08"}},
		{name: gateway.PresetOneBank, gatewayID: "GW-0002", banks: 1,
			lockers: []int{201, 202, 203, 204, 205, 206, 207, 208},
			names:   []string{"1", "2", "3", "4", "5", "6", "7", "8"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := gateway.Preset(tc.name)
			require.NoError(t, err)
			require.NoError(t, l.Validate())
			assert.Equal(t, tc.gatewayID, l.GatewayID)
			assert.Len(t, l.Banks, tc.banks)
			assert.Equal(t, tc.lockers, l.LockerIDs())
			var names []string
			low := 0
			for _, b := range l.Banks {
				for _, lk := range b.Lockers {
					names = append(names, lk.Name)
					if lk.IsLowLocker {
						low++
					}
				}
			}
			assert.Equal(t, tc.names, names)
			assert.Positive(t, low, "some lockers are low")
			assert.Len(t, l.LockerTypes, 3)
		})
	}
	_, err := gateway.Preset("three-banks")
	assert.ErrorContains(t, err, "two-banks")
}

func TestLoadLayoutFile(t *testing.T) {
	t.Parallel()
	l, err := gateway.Preset(gateway.PresetOneBank)
	require.NoError(t, err)
	l.GatewayID = "GW-0042"
	data, err := json.Marshal(l)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "layout.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	got, err := gateway.LoadLayout(path)
	require.NoError(t, err)
	assert.Equal(t, l, got)

	_, err = gateway.LoadLayout(filepath.Join(t.TempDir(), "missing.json"))
	assert.ErrorContains(t, err, "not a preset")

	require.NoError(t, os.WriteFile(path, []byte(`{"banks": [], "extra": 1}`), 0o600))
	_, err = gateway.LoadLayout(path)
	assert.ErrorContains(t, err, "unknown field")
}

func TestLayoutValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(l *gateway.Layout)
		want   string
	}{
		{"duplicate locker id", func(l *gateway.Layout) { l.Banks[0].Lockers[1].LockerID = l.Banks[0].Lockers[0].LockerID }, "locker id"},
		{"duplicate name", func(l *gateway.Layout) { l.Banks[1].Lockers[0].Name = "A01" }, "name"},
		{"duplicate channel", func(l *gateway.Layout) { l.Banks[0].Lockers[1].Channel = 1 }, "channel"},
		{"unknown locker type", func(l *gateway.Layout) { l.Banks[0].Lockers[0].LockerTypeID = 9 }, "unknown locker type"},
		{"unknown bank type", func(l *gateway.Layout) { l.Banks[0].BankTypeID = 9 }, "unknown bank type"},
		{"shared controller", func(l *gateway.Layout) { l.Banks[1].Controller.ID = l.Banks[0].Controller.ID }, "controller id"},
		{"no banks", func(l *gateway.Layout) { l.Banks = nil }, "no banks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := gateway.Preset(gateway.PresetTwoBanks)
			require.NoError(t, err)
			tc.change(&l)
			assert.ErrorContains(t, l.Validate(), tc.want)
		})
	}
}

func TestNewChecksItsConfig(t *testing.T) {
	t.Parallel()
	l, err := gateway.Preset(gateway.PresetTwoBanks)
	require.NoError(t, err)
	sim := simctl.New(simctl.Config{}, l.Wiring())
	t.Cleanup(sim.Close)
	one, err := gateway.Preset(gateway.PresetOneBank)
	require.NoError(t, err)
	oneSim := simctl.New(simctl.Config{}, one.Wiring())
	t.Cleanup(oneSim.Close)
	db := filepath.Join(t.TempDir(), "gw.db")

	tests := []struct {
		name string
		cfg  gateway.Config
		ctls *simctl.Sim
		want string
	}{
		{"no secret", gateway.Config{DBPath: db, Layout: l}, sim, "secret"},
		{"no database", gateway.Config{Secret: "s", Layout: l}, sim, "database"},
		{"missing controller", gateway.Config{Secret: "s", DBPath: db, Layout: l}, oneSim, "no controller"},
		{"extra controller", gateway.Config{Secret: "s", DBPath: db, Layout: one}, sim, "drives no bank"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gateway.New(t.Context(), tc.cfg, tc.ctls.Controllers()...)
			assert.ErrorContains(t, err, tc.want)
		})
	}

	srv, err := gateway.New(t.Context(), gateway.Config{Secret: "s", DBPath: db, Layout: l}, sim.Controllers()...)
	require.NoError(t, err)
	assert.Equal(t, "GW-0001", srv.ID(), "the layout's id by default")
	require.NoError(t, srv.Close())
}
