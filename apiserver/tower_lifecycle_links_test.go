package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/towersim"
	"github.com/lockernet/lockernet/internal/dev/testenv"
)

type lcLink struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	LockerID   int64          `json:"lockerId"`
	TowerID    string         `json:"towerId"`
	LocationID int64          `json:"locationId"`
	LinkToken  string         `json:"linkToken"`
	ExpiresAt  string         `json:"expiresAt"`
	ReturnURL  string         `json:"returnUrl"`
	ClientInfo *string        `json:"clientInfo"`
	Payload    map[string]any `json:"payload"`
}

const lcLinkBase = "/api/v1/locker-open-requests/"

func lcMustLink(t *testing.T, r testenv.Response) lcLink {
	t.Helper()
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var l lcLink
	r.JSON(t, &l)
	m := r.Map(t)
	for _, f := range []string{"id", "lockerId", "towerId", "linkToken", "expiresAt"} {
		assert.Contains(t, m, f)
	}
	assert.Regexp(t, `^([0-9a-f]{2})+\.([0-9a-f]{2})+$`, l.LinkToken, "linkToken is <payload>.<payload_auth>")
	assert.Regexp(t, timestampRE, l.ExpiresAt)
	return l
}

// lcOpenLink presents a link's token at the simulated tower.
func lcOpenLink(t *testing.T, sim *towersim.Simulator, l lcLink, withItem bool) {
	t.Helper()
	payload, auth, ok := strings.Cut(l.LinkToken, ".")
	require.True(t, ok)
	lcRequireOpened(t, lcOpenRaw(t, sim, l.TowerID, payload, auth, withItem))
}

// Drop-off and pickup links (DESIGN §4.6): which locker is picked, bad input, tenancy, and
// that the link's token opens the locker.
func TestLifecycleOpenLinks(t *testing.T) {
	t.Parallel()
	// One simulator per env: a second one would boot the towers again in epoch 1, and its
	// events would collide with the first one's (tower, epoch, seq).
	e, sim, a := lcStart(t)
	b := secondDemoClient(t, e, "lc-links-b")
	loc := locationID(t, e, towerSantaMon)
	ids := lcDemoTower(t, e, towerSantaMon).LockerIDs
	typeOf := func(pos int) int64 { return locationLocker(t, e, a, loc, ids[pos]).Type.ID }
	medium, large := typeOf(mediumHigh), typeOf(largeLow)
	dropoff := func(tok string, body any) testenv.Response {
		return e.Do(http.MethodPost, lcLinkBase+"dropoff-locker-request", tok, body)
	}

	// Not low-required: the high medium lockers first, by id; ids as numbers or strings.
	l1 := lcMustLink(t, dropoff(a, map[string]any{"locationId": loc, "lockerTypeId": medium, "returnUrl": "",
		"clientInfo": "order 7", "payload": map[string]any{"order": 7, "tags": []string{"x"}}}))
	assert.Equal(t, ids[mediumHigh], l1.LockerID)
	assert.Equal(t, towerSantaMon, l1.TowerID)
	assert.Equal(t, "dropoff", l1.Type)
	require.NotNil(t, l1.ClientInfo)
	assert.Equal(t, "order 7", *l1.ClientInfo)
	assert.Equal(t, map[string]any{"order": float64(7), "tags": []any{"x"}}, l1.Payload)
	assert.Equal(t, "rented", locationLocker(t, e, a, loc, l1.LockerID).Status.Name, "the link rents the locker as a drop-off token would")
	got := lcAssigned(t, e, a)[l1.LockerID]
	require.NotNil(t, got.Possession)
	require.Len(t, got.Possession.ActiveTokens, 1)
	assert.Equal(t, "dropoff", got.Possession.ActiveTokens[0].Type)

	// Low required: only low lockers.
	l2 := lcMustLink(t, dropoff(a, map[string]any{"locationId": strconv.FormatInt(loc, 10), "lockerTypeId": strconv.FormatInt(medium, 10),
		"requireLowLocker": true}))
	assert.Equal(t, ids[mediumLow], l2.LockerID)
	assert.True(t, locationLocker(t, e, a, loc, l2.LockerID).IsLowLocker)
	l3 := lcMustLink(t, dropoff(b, map[string]any{"locationId": loc, "lockerTypeId": medium}))
	assert.Equal(t, ids[mediumHigh+1], l3.LockerID, "the next high one")
	l4 := lcMustLink(t, dropoff(b, map[string]any{"locationId": loc, "lockerTypeId": medium, "requireLowLocker": true}))
	assert.Equal(t, ids[mediumLow+1], l4.LockerID)
	m := requireProblem(t, dropoff(a, map[string]any{"locationId": loc, "lockerTypeId": medium}), http.StatusConflict)
	assert.Contains(t, m["detail"], "no available locker")

	// Large lockers are all low here: given when not required too, until none is left.
	lcMustLink(t, dropoff(a, map[string]any{"locationId": loc, "lockerTypeId": large}))
	lcMustLink(t, dropoff(a, map[string]any{"locationId": loc, "lockerTypeId": large, "requireLowLocker": true}))
	requireProblem(t, dropoff(a, map[string]any{"locationId": loc, "lockerTypeId": large}), http.StatusConflict)

	// GET by id, for the client that made the link only: another client of the same
	// organization, or of another one, is told it does not exist.
	r := e.Do(http.MethodGet, lcLinkBase+l1.ID, a, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var again lcLink
	r.JSON(t, &again)
	assert.Equal(t, l1, again)
	requireProblem(t, e.Do(http.MethodGet, lcLinkBase+l1.ID, b, nil), http.StatusNotFound)
	// The live token is not stored in plaintext: only sealed, and bound to its link.
	var plain *string
	var sealed []byte
	require.NoError(t, e.Store.Pool().QueryRow(context.Background(),
		`SELECT link_token, link_token_sealed FROM locker_open_requests WHERE id = $1`, l1.ID).Scan(&plain, &sealed))
	assert.Nil(t, plain)
	require.NotEmpty(t, sealed)
	assert.NotContains(t, string(sealed), l1.LinkToken)
	_, err := e.Store.Pool().Exec(context.Background(), `UPDATE locker_open_requests SET link_token = 'x' WHERE id = $1`, l1.ID)
	require.Error(t, err, "the table refuses a plaintext token")
	other := e.NewOtherOrg(t)
	otherTok := otherOrgToken(t, e, other)
	requireProblem(t, e.Do(http.MethodGet, lcLinkBase+l1.ID, otherTok, nil), http.StatusNotFound)
	requireProblem(t, e.Do(http.MethodGet, lcLinkBase+uuid.NewString(), a, nil), http.StatusNotFound)
	r = e.Do(http.MethodGet, lcLinkBase+"not-a-uuid", a, nil)
	assert.Contains(t, []int{http.StatusNotFound, http.StatusUnprocessableEntity}, r.Status, "%s", r.Body)

	// Unknown or foreign location or type; malformed ids and bodies.
	for name, tc := range map[string]struct {
		body any
		want int
	}{
		"unknown location":            {map[string]any{"locationId": 999999, "lockerTypeId": medium}, http.StatusNotFound},
		"another org's location":      {map[string]any{"locationId": other.LocationID, "lockerTypeId": medium}, http.StatusNotFound},
		"unknown type":                {map[string]any{"locationId": loc, "lockerTypeId": 999999}, http.StatusUnprocessableEntity},
		"location id not a number":    {map[string]any{"locationId": "abc", "lockerTypeId": medium}, http.StatusUnprocessableEntity},
		"zero type id":                {map[string]any{"locationId": loc, "lockerTypeId": 0}, http.StatusUnprocessableEntity},
		"negative location":           {map[string]any{"locationId": -1, "lockerTypeId": medium}, http.StatusUnprocessableEntity},
		"fractional id":               {map[string]any{"locationId": 1.5, "lockerTypeId": medium}, http.StatusUnprocessableEntity},
		"missing type":                {map[string]any{"locationId": loc}, http.StatusUnprocessableEntity},
		"payload not an object":       {map[string]any{"locationId": loc, "lockerTypeId": medium, "payload": []int{1}}, http.StatusUnprocessableEntity},
		"clientInfo too long":         {map[string]any{"locationId": loc, "lockerTypeId": medium, "clientInfo": strings.Repeat("x", 257)}, http.StatusUnprocessableEntity},
		"requireLowLocker not a bool": {map[string]any{"locationId": loc, "lockerTypeId": medium, "requireLowLocker": "yes"}, http.StatusUnprocessableEntity},
	} {
		t.Run(name, func(t *testing.T) {
			requireProblem(t, dropoff(a, tc.body), tc.want)
		})
	}
	otherType := locationLocker(t, e, otherTok, other.LocationID, other.LockerID).Type.ID
	requireProblem(t, dropoff(a, map[string]any{"locationId": loc, "lockerTypeId": otherType}), http.StatusUnprocessableEntity)
	requireProblem(t, dropoff(e.Token("tower_access"), map[string]any{"locationId": loc, "lockerTypeId": medium}), http.StatusForbidden)

	// The link's token opens the locker: the item goes in.
	lcOpenLink(t, sim, l1, true)
	assert.Equal(t, "occupied", locationLocker(t, e, a, loc, l1.LockerID).Status.Name)

	// Pickup links: for the caller's occupied locker only; the singular alias works too.
	pickup := func(tok, base string, body any) testenv.Response {
		return e.Do(http.MethodPost, "/api/v1/"+base+"/pickup-locker-request", tok, body)
	}
	lcConflict(t, pickup(a, "locker-open-requests", map[string]any{"lockerId": l2.LockerID}), "rented")
	lcConflict(t, pickup(b, "locker-open-requests", map[string]any{"lockerId": l1.LockerID}), "occupied")
	requireProblem(t, pickup(otherTok, "locker-open-requests", map[string]any{"lockerId": l1.LockerID}), http.StatusNotFound)
	requireProblem(t, pickup(a, "locker-open-requests", map[string]any{"lockerId": other.LockerID}), http.StatusNotFound)
	requireProblem(t, pickup(a, "locker-open-requests", map[string]any{"lockerId": 999999}), http.StatusNotFound)
	requireProblem(t, pickup(a, "locker-open-requests", map[string]any{"lockerId": "x"}), http.StatusUnprocessableEntity)
	free := ids[smallHigh]
	lcConflict(t, pickup(a, "locker-open-requests", map[string]any{"lockerId": free}), "available")

	pl := lcMustLink(t, pickup(a, "locker-open-request", map[string]any{"lockerId": fmt.Sprint(l1.LockerID), "returnUrl": "app://done"}))
	assert.Equal(t, "pickup", pl.Type)
	assert.Equal(t, l1.LockerID, pl.LockerID)
	assert.Equal(t, "app://done", pl.ReturnURL)
	r = e.Do(http.MethodGet, lcLinkBase+pl.ID, a, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	lcOpenLink(t, sim, pl, false)
	assert.Equal(t, "available", locationLocker(t, e, a, loc, l1.LockerID).Status.Name)
	assert.NotContains(t, lcAssigned(t, e, a), l1.LockerID)

	// The singular drop-off alias picks lockers the same way.
	l5 := lcMustLink(t, e.Do(http.MethodPost, "/api/v1/locker-open-request/dropoff-locker-request", a,
		map[string]any{"locationId": loc, "lockerTypeId": medium}))
	assert.Equal(t, l1.LockerID, l5.LockerID, "the picked-up locker is free again")
}
