package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/store"
)

// Demo towers (internal/seed): two at Union Station, one each at Santa Monica Pier and
// Pasadena Old Town. Seed.Towers lists them in this order.
const (
	towerUnion1   = "0100000000000011"
	towerUnion2   = "0100000000000012"
	towerSantaMon = "0100000000000021"
	towerPasadena = "0100000000000031"

	// laArea covers Los Angeles: every demo location, tower and gateway-only.
	laArea = "start=33.9,-118.6&end=34.2,-118.1"
)

// Positions in a demo tower's LockerIDs (names 1..12): small 1-6, medium 7-10, large
// 11-12; names 9-12 are low.
const (
	smallHigh  = 0 // name "1"
	mediumHigh = 6 // name "7"
	mediumLow  = 8 // name "9"
	largeLow   = 10
)

var timestampRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

// concurrentStatuses makes n calls at once and returns their statuses.
func concurrentStatuses(n int, call func() int) []int {
	statuses := make([]int, n)
	testenv.AtOnce(n, func(i int) { statuses[i] = call() })
	return statuses
}

// lockerID returns the id of the locker at position i (see the constants above) of a demo tower.
func lockerID(t *testing.T, e *testenv.Env, tower string, i int) int64 {
	t.Helper()
	for _, tw := range e.Seed.Towers {
		if tw.ID == tower {
			require.Greater(t, len(tw.LockerIDs), i)
			return tw.LockerIDs[i]
		}
	}
	t.Fatalf("no demo tower %s", tower)
	return 0
}

// locationID returns the demo location of a tower.
func locationID(t *testing.T, e *testenv.Env, tower string) int64 {
	t.Helper()
	for _, tw := range e.Seed.Towers {
		if tw.ID == tower {
			return tw.LocationID
		}
	}
	t.Fatalf("no demo tower %s", tower)
	return 0
}

// send is a request with arbitrary headers (testenv.Do only sets JSON and bearer headers).
func send(t *testing.T, method, fullURL string, header http.Header, body io.Reader) testenv.Response {
	t.Helper()
	var b any
	if body != nil {
		b = body
	}
	r, err := testenv.Exchange(method, fullURL, header, b)
	require.NoError(t, err)
	return r
}

// clientToken runs the client credentials grant for any client.
func clientToken(t *testing.T, e *testenv.Env, clientID, secret string, scopes ...string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	r := send(t, http.MethodPost, e.URL+"/oauth/token",
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, strings.NewReader(form.Encode()))
	require.Equal(t, http.StatusOK, r.Status, "token: %s", r.Body)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	r.JSON(t, &tok)
	return tok.AccessToken
}

// issue signs a token valid for an hour straight from the authority. Tests whose subject
// is not the token service use it, so that waiting for a parallel slot on a busy machine can
// never outlast a 300 s token.
func issue(t *testing.T, e *testenv.Env, clientID string, orgID int64, scopes ...string) string {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess}
	}
	tok, _, err := e.Auth.Issue(context.Background(), clientID, clientID, orgID, scopes, time.Hour)
	require.NoError(t, err)
	return tok
}

// demoToken is an hour-long token of the demo client.
func demoToken(t *testing.T, e *testenv.Env, scopes ...string) string {
	t.Helper()
	return issue(t, e, e.Creds.ServiceProvider.ClientID, e.Creds.OrganizationID, scopes...)
}

// startDemo starts an env and returns it with a demo service-provider token.
func startDemo(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	e := testenv.Start(t, testenv.Options{})
	return e, demoToken(t, e)
}

// otherOrgToken returns a service-provider token of a second organization.
func otherOrgToken(t *testing.T, e *testenv.Env, o testenv.OtherOrg) string {
	t.Helper()
	clientToken(t, e, o.ClientID, o.ClientSecret) // its credentials work at the token endpoint
	return issue(t, e, o.ClientID, o.OrgID)
}

// secondDemoClient creates another service-provider client of the demo organization and
// returns a token of it.
func secondDemoClient(t *testing.T, e *testenv.Env, clientID string) string {
	t.Helper()
	secret := credential.NewSecret()
	require.NoError(t, e.Store.CreateClient(context.Background(), store.Client{
		ClientID: clientID, OrganizationID: e.Creds.OrganizationID, Name: "Second demo app",
		SecretHash: credential.Hash(secret), Scopes: []string{jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess},
	}))
	clientToken(t, e, clientID, secret) // its credentials work at the token endpoint
	return issue(t, e, clientID, e.Creds.OrganizationID)
}

// requireProblem checks an RFC 9457 error answer and returns its body.
func requireProblem(t *testing.T, r testenv.Response, status int) map[string]any {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	assert.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
	m := r.Map(t)
	detail, ok := m["detail"].(string)
	assert.True(t, ok, "detail must be a string: %s", r.Body)
	assert.NotEmpty(t, detail)
	assert.EqualValues(t, status, m["status"])
	return m
}

// keys returns the sorted keys of a JSON object, or the names of locations by name.
func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func sorted(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// Wire shapes, decoded the way a client would.

type availability struct {
	TotalLockers     int `json:"totalLockers"`
	AvailableLockers int `json:"availableLockers"`
}

type typeAvailability struct {
	LockerType struct {
		ID          int64   `json:"id"`
		Name        string  `json:"name"`
		Description *string `json:"description"`
		SortOrder   int     `json:"sortOrder"`
	} `json:"lockerType"`
	LockerAvailability    availability `json:"lockerAvailability"`
	LowLockerAvailability availability `json:"lowLockerAvailability"`
}

type location struct {
	ID                    int64              `json:"id"`
	Name                  string             `json:"name"`
	Lat                   float64            `json:"lat"`
	Lon                   float64            `json:"lon"`
	City                  string             `json:"city"`
	Timezone              *string            `json:"timezone"`
	LockerAvailability    availability       `json:"lockerAvailability"`
	LowLockerAvailability availability       `json:"lowLockerAvailability"`
	ByType                []typeAvailability `json:"byType"`
}

type lockerStatus struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

type locker struct {
	ID          int64        `json:"id"`
	Name        string       `json:"name"`
	IsLowLocker bool         `json:"isLowLocker"`
	TowerID     string       `json:"towerId"`
	LocationID  int64        `json:"locationId"`
	Status      lockerStatus `json:"status"`
	Type        struct {
		ID          int64   `json:"id"`
		Name        string  `json:"name"`
		Description *string `json:"description"`
	} `json:"type"`
	AccessMode string `json:"accessMode"`
}

type reservation struct {
	ID        string `json:"id"`
	LockerID  int64  `json:"lockerId"`
	TowerID   string `json:"towerId"`
	Status    string `json:"status"`
	CreatedAt string `json:"createdAt"`
	ExpiresAt string `json:"expiresAt"`
	Duration  int    `json:"duration"`
}

func locationsByName(t *testing.T, r testenv.Response) map[string]location {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	var ls []location
	r.JSON(t, &ls)
	out := map[string]location{}
	for _, l := range ls {
		out[l.Name] = l
	}
	require.Len(t, out, len(ls), "location names repeat: %s", r.Body)
	return out
}

// byTypeName indexes a location's per-type availability.
func byTypeName(l location) map[string]typeAvailability {
	out := map[string]typeAvailability{}
	for _, ta := range l.ByType {
		out[ta.LockerType.Name] = ta
	}
	return out
}

// inArea runs the in-area search and indexes the result by name.
func inArea(t *testing.T, e *testenv.Env, tok, query string) map[string]location {
	t.Helper()
	return locationsByName(t, e.Do(http.MethodGet, "/api/v1/locations/in-area?"+query, tok, nil))
}

func reservePath(tower string, lockerID int64) string {
	return fmt.Sprintf("/api/v1/towers/%s/lockers/%d/reservations", tower, lockerID)
}

// reserve creates a reservation and requires the 201.
func reserve(t *testing.T, e *testenv.Env, tok, tower string, lockerID int64, duration int) reservation {
	t.Helper()
	r := e.Do(http.MethodPost, reservePath(tower, lockerID), tok, map[string]any{"duration": duration})
	require.Equal(t, http.StatusCreated, r.Status, "reserve: %s", r.Body)
	var res reservation
	r.JSON(t, &res)
	return res
}

func cancelReservation(t *testing.T, e *testenv.Env, tok string, res reservation) testenv.Response {
	t.Helper()
	return e.Do(http.MethodDelete, reservePath(res.TowerID, res.LockerID)+"/"+res.ID, tok, nil)
}

func getReservation(t *testing.T, e *testenv.Env, tok, id string) reservation {
	t.Helper()
	r := e.Do(http.MethodGet, "/api/v1/reservations/"+id, tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "get reservation: %s", r.Body)
	var res reservation
	r.JSON(t, &res)
	return res
}

// towerLocker returns one locker as the tower's locker list shows it.
func towerLocker(t *testing.T, e *testenv.Env, tok, tower string, id int64) locker {
	t.Helper()
	return listedLocker(t, e, tok, "/api/v1/towers/"+tower+"/lockers", id)
}

// locationLocker returns one locker as its location's locker list shows it.
func locationLocker(t *testing.T, e *testenv.Env, tok string, locationID, id int64) locker {
	t.Helper()
	return listedLocker(t, e, tok, fmt.Sprintf("/api/v1/locations/%d/lockers", locationID), id)
}

// listedLocker returns locker id as the locker list at path shows it.
func listedLocker(t *testing.T, e *testenv.Env, tok, path string, id int64) locker {
	t.Helper()
	r := e.Do(http.MethodGet, path, tok, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
	var ks []locker
	r.JSON(t, &ks)
	for _, k := range ks {
		if k.ID == id {
			return k
		}
	}
	t.Fatalf("locker %d not in %s: %s", id, path, r.Body)
	return locker{}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
