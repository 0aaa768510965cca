package seed

import (
	"encoding/json"
	"fmt"
	"os"
)

// TowerSimConfig is the tower simulator's provisioning file (hardware/towersim.Config):
// the demo towers with their secrets, as a factory would provision real ones, and the demo
// client the simulated SDK uploads events with.
type TowerSimConfig struct {
	APIBaseURL   string          `json:"apiBaseUrl"`
	ClientID     string          `json:"clientId"`
	ClientSecret string          `json:"clientSecret"`
	StateDir     string          `json:"stateDir"`
	Towers       []TowerSimTower `json:"towers"`
}

// TowerSimTower provisions one simulated tower.
type TowerSimTower struct {
	ID        string  `json:"id"`
	SecretHex string  `json:"secretHex"`
	LockerIDs []int64 `json:"lockerIds"`
}

// WriteTowerSimConfig writes the simulator's provisioning file for the seeded towers
// (mode 0600: it holds the towers' secrets). apiURL is where the simulator uploads events.
func WriteTowerSimConfig(path, apiURL, stateDir string, creds Credentials, towers []Tower) error {
	c := TowerSimConfig{APIBaseURL: apiURL, ClientID: creds.ServiceProvider.ClientID,
		ClientSecret: creds.ServiceProvider.ClientSecret, StateDir: stateDir, Towers: []TowerSimTower{}}
	for _, t := range towers {
		c.Towers = append(c.Towers, TowerSimTower{ID: t.ID, SecretHex: SecretHex(t.Secret), LockerIDs: t.LockerIDs})
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode tower simulator config: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write tower simulator config: %w", err)
	}
	return nil
}
