package towersim

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// Config is the provisioning file the dev stack writes for the simulator:
//
//	{
//	  "apiBaseUrl": "http://127.0.0.1:8080",
//	  "clientId": "...", "clientSecret": "...",
//	  "stateDir": "/path/to/state",
//	  "towers": [{"id": "0100000000000014", "secretHex": "...", "lockerIds": [959, 960]}]
//	}
//
// apiBaseUrl may be empty (events then stay queued); clientId/clientSecret may be empty
// (uploads then need an access token passed with each open request); stateDir may be empty
// (nothing survives a restart). A relative stateDir is taken relative to the file.
type Config struct {
	APIBaseURL   string        `json:"apiBaseUrl"`
	ClientID     string        `json:"clientId"`
	ClientSecret string        `json:"clientSecret"`
	StateDir     string        `json:"stateDir"`
	Towers       []TowerConfig `json:"towers"`
}

// TowerConfig provisions one tower.
type TowerConfig struct {
	ID        string  `json:"id"`        // 16 hex digits, either case
	SecretHex string  `json:"secretHex"` // the tower secret the cloud derives token and event keys from
	LockerIDs []int64 `json:"lockerIds"` // the tower's lockers, each > 0
}

// minSecretLen is the shortest tower secret accepted (128 bits).
const minSecretLen = 16

// LoadConfig reads and validates a provisioning file. Tower ids come back lower-case.
func LoadConfig(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return Config{}, fmt.Errorf("parse config %s: %w", path, err)
	}
	if cfg.StateDir != "" && !filepath.IsAbs(cfg.StateDir) {
		cfg.StateDir = filepath.Join(filepath.Dir(path), cfg.StateDir)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("validate config %s: %w", path, err)
	}
	return cfg, nil
}

// Validate checks the configuration and normalises tower ids to lower case.
func (c *Config) Validate() error {
	if len(c.Towers) == 0 {
		return errors.New("no towers")
	}
	seen := make(map[string]bool, len(c.Towers))
	for i := range c.Towers {
		tc := &c.Towers[i]
		if err := tc.validate(); err != nil {
			return fmt.Errorf("tower %d: %w", i, err)
		}
		if seen[tc.ID] {
			return fmt.Errorf("tower %s: listed twice", tc.ID)
		}
		seen[tc.ID] = true
	}
	return nil
}

func (tc *TowerConfig) validate() error {
	id, err := towerproto.NormalizeTowerID(tc.ID)
	if err != nil {
		return fmt.Errorf("check id: %w", err)
	}
	tc.ID = id
	if _, err := tc.secret(); err != nil {
		return err
	}
	if len(tc.LockerIDs) == 0 {
		return fmt.Errorf("tower %s: no lockers", tc.ID)
	}
	seen := make(map[int64]bool, len(tc.LockerIDs))
	for _, l := range tc.LockerIDs {
		if l <= 0 {
			return fmt.Errorf("tower %s: locker id %d is not positive", tc.ID, l)
		}
		if seen[l] {
			return fmt.Errorf("tower %s: locker %d listed twice", tc.ID, l)
		}
		seen[l] = true
	}
	return nil
}

func (tc *TowerConfig) secret() ([]byte, error) {
	s, err := hex.DecodeString(tc.SecretHex)
	if err != nil {
		return nil, fmt.Errorf("tower %s: decode secretHex: %w", tc.ID, err)
	}
	if len(s) < minSecretLen {
		return nil, fmt.Errorf("tower %s: secret is %d bytes, at least %d needed", tc.ID, len(s), minSecretLen)
	}
	return s, nil
}
