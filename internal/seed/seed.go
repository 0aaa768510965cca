// Package seed writes the demo data of DESIGN §9: one organization with a sub-organization,
// a service-provider client, three tower locations in Los Angeles (four towers of twelve
// lockers) and two gateway locations. It is idempotent: running it again keeps the data and
// the credentials.
package seed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// Demo names and ids the acceptance checks rely on.
const (
	OrganizationName    = "Demo Logistics"
	SubOrganizationName = "Downtown"
	ClientID            = "demo-logistics-sp"
	CredentialsFile     = "demo-credentials.json"
)

// ServiceProvider is the demo OAuth client.
type ServiceProvider struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// TowerRef names a demo tower and its location.
type TowerRef struct {
	ID         string `json:"id"`
	LocationID int64  `json:"location_id"`
}

// GatewayRef names a demo gateway (filled in by the dev stack, which runs the gateways).
type GatewayRef struct {
	Serial     string `json:"serial"`
	LocationID int64  `json:"location_id"`
	URL        string `json:"url"`
	Secret     string `json:"secret"`
	SimURL     string `json:"sim_url"`
}

// Credentials is demo-credentials.json: the one place scripts and people find what they need.
type Credentials struct {
	OrganizationID    int64           `json:"organization_id"`
	SubOrganizationID int64           `json:"sub_organization_id"`
	ServiceProvider   ServiceProvider `json:"service_provider"`
	AppEngineAPIKey   string          `json:"app_engine_api_key"`
	GatewayAPIKey     string          `json:"gateway_api_key"`
	Towers            []TowerRef      `json:"towers"`
	Gateways          []GatewayRef    `json:"gateways"`
	TowerSimURL       string          `json:"tower_sim_url"`
	APIURL            string          `json:"api_url"`
	TemporalUIURL     string          `json:"temporal_ui_url,omitempty"`
}

// Tower is a seeded tower with its plaintext secret, for provisioning the simulator.
type Tower struct {
	ID         string
	LocationID int64
	Secret     []byte
	LockerIDs  []int64
}

// Result is what the seed made.
type Result struct {
	Credentials       Credentials
	Towers            []Tower
	GatewayLocationID map[string]int64 // gateway serial -> location id
}

type lockerSpec struct {
	name string
	typ  string
	low  bool
}

// towerLayout: top rows small, then medium, then large; the bottom row of four is low.
var towerLayout = []lockerSpec{
	{"1", "small", false}, {"2", "small", false}, {"3", "small", false},
	{"4", "small", false}, {"5", "small", false}, {"6", "small", false},
	{"7", "medium", false}, {"8", "medium", false}, {"9", "medium", true},
	{"10", "medium", true}, {"11", "large", true}, {"12", "large", true},
}

type locationSpec struct {
	name, address1, city, zip string
	lat, lon                  float64
	towers                    []string
	gateway                   string
	downtown                  bool
	notes                     string
}

var locations = []locationSpec{
	{name: "Union Station", address1: "800 N Alameda St", city: "Los Angeles", zip: "90012", lat: 34.0562, lon: -118.2365,
		towers: []string{"0100000000000011", "0100000000000012"}, downtown: true, notes: "Lockers in the east portal, next to the ticket hall."},
	{name: "Santa Monica Pier", address1: "200 Santa Monica Pier", city: "Santa Monica", zip: "90401", lat: 34.0094, lon: -118.4973,
		towers: []string{"0100000000000021"}},
	{name: "Pasadena Old Town", address1: "100 W Colorado Blvd", city: "Pasadena", zip: "91105", lat: 34.1478, lon: -118.1445,
		towers: []string{"0100000000000031"}},
	{name: "Downtown Hub", address1: "1111 S Figueroa St", city: "Los Angeles", zip: "90015", lat: 34.0430, lon: -118.2673,
		gateway: "GW-0001", downtown: true},
	{name: "Culver City", address1: "9300 Culver Blvd", city: "Culver City", zip: "90232", lat: 34.0211, lon: -118.3965,
		gateway: "GW-0002"},
}

var lockerTypes = []store.LockerType{
	{Name: "small", Description: ptr("Fits a shoebox: 30 x 40 x 60 cm"), SortOrder: 1},
	{Name: "medium", Description: ptr("Fits a carry-on: 45 x 40 x 60 cm"), SortOrder: 2},
	{Name: "large", Description: ptr("Fits a large suitcase: 90 x 40 x 60 cm"), SortOrder: 3},
}

func ptr[T any](v T) *T { return &v }

// DefaultTowerIDPrefix begins the demo towers' ids unless DemoOptions says otherwise.
const DefaultTowerIDPrefix = "01"

// DemoOptions vary the demo data between environments.
type DemoOptions struct {
	// TowerIDPrefix replaces the first two hex digits of every demo tower id
	// (LOCKERNET_TOWER_ID_PREFIX), so a sandbox's towers never share ids with production's.
	// Choose it before the first seed: seeding again with another prefix adds new towers.
	TowerIDPrefix string
}

// Demo writes the demo data. previous is the credentials file of an earlier run (nil if
// none): its client secret is kept when it still matches, so re-running changes nothing.
func Demo(ctx context.Context, st *store.Store, ring *keyring.Keyring, previous *Credentials) (Result, error) {
	return DemoWith(ctx, st, ring, previous, DemoOptions{})
}

// DemoWith is Demo with options.
func DemoWith(ctx context.Context, st *store.Store, ring *keyring.Keyring, previous *Credentials, opts DemoOptions) (Result, error) {
	if opts.TowerIDPrefix == "" {
		opts.TowerIDPrefix = DefaultTowerIDPrefix
	}
	if b, err := hex.DecodeString(opts.TowerIDPrefix); err != nil || len(b) != 1 {
		return Result{}, fmt.Errorf("seed demo data: tower id prefix %q is not two hex digits", opts.TowerIDPrefix)
	}
	var res Result
	err := st.WithTx(ctx, func(tx *store.Store) error {
		var err error
		res, err = demo(ctx, tx, ring, previous, strings.ToLower(opts.TowerIDPrefix))
		return err
	})
	return res, err
}

func demo(ctx context.Context, st *store.Store, ring *keyring.Keyring, previous *Credentials, towerPrefix string) (Result, error) {
	org, err := st.EnsureOrganization(ctx, OrganizationName)
	if err != nil {
		return Result{}, err
	}
	sub, err := st.EnsureSubOrganization(ctx, org.ID, SubOrganizationName)
	if err != nil {
		return Result{}, err
	}
	secret, err := ensureClient(ctx, st, org.ID, previous)
	if err != nil {
		return Result{}, err
	}
	res := Result{
		Credentials: Credentials{
			OrganizationID: org.ID, SubOrganizationID: sub,
			ServiceProvider: ServiceProvider{ClientID: ClientID, ClientSecret: secret},
			Towers:          []TowerRef{}, Gateways: []GatewayRef{},
		},
		GatewayLocationID: map[string]int64{},
	}
	if previous != nil {
		res.Credentials.AppEngineAPIKey, res.Credentials.GatewayAPIKey = previous.AppEngineAPIKey, previous.GatewayAPIKey
	}
	if res.Credentials.AppEngineAPIKey, err = ensureAppKey(ctx, st, org.ID, res.Credentials.AppEngineAPIKey); err != nil {
		return Result{}, err
	}
	if res.Credentials.GatewayAPIKey, err = ensureGatewayKey(ctx, st, org.ID, res.Credentials.GatewayAPIKey); err != nil {
		return Result{}, err
	}
	typeIDs := map[string]int64{}
	for _, t := range lockerTypes {
		if typeIDs[t.Name], err = st.UpsertLockerType(ctx, org.ID, t); err != nil {
			return Result{}, err
		}
	}
	for _, l := range locations {
		nl := store.NewLocation{
			OrganizationID: org.ID, Name: l.name, Lat: l.lat, Lon: l.lon,
			Address1: l.address1, City: l.city, State: "CA", Zip: l.zip, Country: "US",
			AccessHours: ptr("05:00-23:00"), Timezone: ptr("America/Los_Angeles"),
		}
		if l.downtown {
			nl.SubOrganizationID = &sub
		}
		if l.notes != "" {
			nl.Notes = &l.notes
		}
		locID, err := st.UpsertLocation(ctx, nl)
		if err != nil {
			return Result{}, err
		}
		if l.gateway != "" {
			res.GatewayLocationID[l.gateway] = locID
		}
		for i, towerID := range l.towers {
			towerID = towerPrefix + towerID[len(towerPrefix):]
			t, err := ensureTower(ctx, st, ring, store.Tower{ID: towerID, OrganizationID: org.ID, LocationID: locID,
				Name: l.name + " tower " + strconv.Itoa(i+1)}, typeIDs)
			if err != nil {
				return Result{}, err
			}
			res.Towers = append(res.Towers, t)
			res.Credentials.Towers = append(res.Credentials.Towers, TowerRef{ID: towerID, LocationID: locID})
		}
	}
	return res, nil
}

// ensureAppKey keeps the bootstrap app engine admin key of an earlier run if it still
// works, else makes a new one.
func ensureAppKey(ctx context.Context, st *store.Store, orgID int64, previous string) (string, error) {
	if previous != "" {
		k, err := st.UseAppKey(ctx, credential.Hash(previous))
		if err == nil && k.OrganizationID == orgID && k.OrgWide() {
			return previous, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
	}
	clientID := ClientID
	key, _, err := st.CreateAppKey(ctx, store.AppKey{OrganizationID: orgID, ClientID: &clientID})
	return key, err
}

// ensureGatewayKey keeps the gateway cloud API key of an earlier run if it still works for
// the demo organization, else issues a new one.
func ensureGatewayKey(ctx context.Context, st *store.Store, orgID int64, previous string) (string, error) {
	if previous != "" {
		k, err := st.ActiveGatewayKeyByHash(ctx, credential.Hash(previous))
		if err == nil && k.OrganizationID == orgID {
			return previous, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
	}
	key, _, err := st.IssueGatewayKey(ctx, orgID, "demo", nil)
	return key, err
}

func ensureClient(ctx context.Context, st *store.Store, orgID int64, previous *Credentials) (string, error) {
	existing, err := st.ClientByID(ctx, ClientID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		secret := credential.NewSecret()
		if err := st.CreateClient(ctx, store.Client{
			ClientID: ClientID, OrganizationID: orgID, Name: "Demo Logistics app",
			SecretHash: credential.Hash(secret),
			Scopes:     []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess},
		}); err != nil {
			return "", err
		}
		// Harbor's example apps ask for developer sessions: the demo client may use every claim.
		return secret, st.SetClientSDKClaims(ctx, ClientID, towerproto.AllClaims)
	case err != nil:
		return "", err
	}
	// A database seeded before the mobile SDK API: give the demo client its claims, unless an
	// operator has set them since.
	if claims, _, err := st.ClientSDKClaims(ctx, ClientID); err != nil {
		return "", err
	} else if claims == nil {
		if err := st.SetClientSDKClaims(ctx, ClientID, towerproto.AllClaims); err != nil {
			return "", err
		}
	}
	if previous != nil && previous.ServiceProvider.ClientID == ClientID && credential.Equal(previous.ServiceProvider.ClientSecret, existing.SecretHash) {
		return previous.ServiceProvider.ClientSecret, nil
	}
	// The credentials file was lost: issue a new secret so it can be written again.
	secret := credential.NewSecret()
	return secret, st.SetClientSecret(ctx, ClientID, credential.Hash(secret))
}

func ensureTower(ctx context.Context, st *store.Store, ring *keyring.Keyring, t store.Tower, typeIDs map[string]int64) (Tower, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return Tower{}, fmt.Errorf("generate tower secret: %w", err)
	}
	t.SecretSealed = ring.Seal(keyring.TowerSecretPurpose(t.ID), fresh)
	sealed, err := st.EnsureTower(ctx, t)
	if err != nil {
		return Tower{}, err
	}
	secret, err := ring.Open(keyring.TowerSecretPurpose(t.ID), sealed)
	if err != nil {
		return Tower{}, fmt.Errorf("open tower secret: %w", err)
	}
	out := Tower{ID: t.ID, LocationID: t.LocationID, Secret: secret}
	for _, k := range towerLayout {
		id, err := st.EnsureLocker(ctx, store.NewLocker{TowerID: t.ID, Name: k.name, TypeID: typeIDs[k.typ], IsLowLocker: k.low})
		if err != nil {
			return Tower{}, err
		}
		out.LockerIDs = append(out.LockerIDs, id)
	}
	return out, nil
}

// ReadCredentials reads a credentials file; a missing file is (nil, nil).
func ReadCredentials(path string) (*Credentials, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decode credentials %s: %w", path, err)
	}
	return &c, nil
}

// WriteCredentials writes the credentials file (mode 0600) atomically.
func WriteCredentials(path string, c Credentials) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode credentials: %w", err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create dir for %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SecretHex is a tower secret as the simulator's provisioning file writes it.
func SecretHex(b []byte) string { return hex.EncodeToString(b) }

// DemoPickupPolicy is the pickup window policy `make run` gives the demo organization when it
// has none (docs/guides/pickup-windows.md): windows short enough to watch a parcel be reminded
// and run out in one sitting.
func DemoPickupPolicy(orgID int64) store.PickupPolicy {
	return store.PickupPolicy{OrgID: orgID, WindowSeconds: 15 * 60, ReminderOffsets: []int{10 * 60, 2 * 60},
		MaxExtensions: 2, ExtensionSeconds: 10 * 60, OnExpiry: store.OnExpiryNotify}
}

// EnsureDemoPickupPolicy sets DemoPickupPolicy unless the organization has a policy already (an
// operator's change outlives a restart).
func EnsureDemoPickupPolicy(ctx context.Context, st *store.Store, orgID int64) error {
	_, err := st.PickupPolicy(ctx, orgID, nil)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	_, _, err = st.SetPickupPolicy(ctx, DemoPickupPolicy(orgID), false)
	return err
}
