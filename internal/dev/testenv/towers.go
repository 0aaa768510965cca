package testenv

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/seed"
)

// TowerSim returns a tower simulator provisioned with the demo towers and their keys, that
// uploads its events to this env's API with the demo client's credentials (as the mobile SDK
// would, with a tower_access token). Options (e.g. towersim.WithClock) pass through.
func (e *Env) TowerSim(t testing.TB, opts ...towersim.Option) *towersim.Simulator {
	t.Helper()
	cfg := towersim.Config{APIBaseURL: e.URL, ClientID: e.Creds.ServiceProvider.ClientID,
		ClientSecret: e.Creds.ServiceProvider.ClientSecret, StateDir: t.TempDir()}
	for _, tw := range e.Seed.Towers {
		cfg.Towers = append(cfg.Towers, towersim.TowerConfig{ID: tw.ID, SecretHex: seed.SecretHex(tw.Secret), LockerIDs: tw.LockerIDs})
	}
	sim, err := towersim.NewSimulator(cfg, opts...)
	require.NoError(t, err)
	return sim
}
