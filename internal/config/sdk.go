package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// The mobile SDK API's settings (/sdk/v1, DESIGN §4.8):
//
//	LOCKERNET_SDK_DEFAULT_CLAIMS  session claims a client may ask for unless it has its own list
//	                              (lockernet-admin client sdk-claims) [sync_packet,locker_pickup,locker_delivery]
//	LOCKERNET_SDK_BLE_SERVICES    BLE services the SDK scans for, as name=uuid pairs separated by commas
//	                              [tower=DefaultBLEServiceUUID]
//	LOCKERNET_SDK_COMMAND_TTL     how long a signed command batch stays valid at a tower [24h]

// DefaultSDKClaims are the claims of a client without its own list: the customer flows.
const DefaultSDKClaims = "sync_packet,locker_pickup,locker_delivery"

// DefaultBLEServiceUUID is the primary BLE service our towers advertise.
const DefaultBLEServiceUUID = "6f3c2a10-8e4b-4d1f-9a52-1c7e5b0d9a01"

// BLEService is one BLE service the SDK scans for.
type BLEService struct {
	Name string
	UUID string
}

func (c *Config) loadSDK() error {
	claims, err := towerproto.ParseClaims(env("LOCKERNET_SDK_DEFAULT_CLAIMS", DefaultSDKClaims))
	if err != nil {
		return fmt.Errorf("parse LOCKERNET_SDK_DEFAULT_CLAIMS: %w", err)
	}
	c.SDKDefaultClaims = claims
	if c.SDKBLEServices, err = ParseBLEServices(env("LOCKERNET_SDK_BLE_SERVICES", "tower="+DefaultBLEServiceUUID)); err != nil {
		return fmt.Errorf("parse LOCKERNET_SDK_BLE_SERVICES: %w", err)
	}
	if c.SDKCommandTTL, err = parsePositiveDuration("LOCKERNET_SDK_COMMAND_TTL", "24h"); err != nil {
		return err
	}
	return nil
}

// ParseBLEServices reads "name=uuid,name=uuid"; at least one, names unique.
func ParseBLEServices(s string) ([]BLEService, error) {
	var out []BLEService
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		name, id, ok := strings.Cut(strings.TrimSpace(part), "=")
		name = strings.TrimSpace(name)
		u, err := uuid.Parse(strings.TrimSpace(id))
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%q is not name=uuid", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("service %q listed twice", name)
		}
		seen[name] = true
		out = append(out, BLEService{Name: name, UUID: u.String()})
	}
	return out, nil
}

func parsePositiveDuration(name, def string) (time.Duration, error) {
	d, err := time.ParseDuration(env(name, def))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("parse %s: must be a positive duration such as 24h", name)
	}
	return d, nil
}
