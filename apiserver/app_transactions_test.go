package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

func TestOrganizationTransactions(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	ctx := context.Background()
	other := e.NewOtherOrg(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	insert := func(org int64, sub *int64, typ, ref, locker, tower, location, city, zip string, at time.Time) uuid.UUID {
		id := uuid.New()
		_, err := e.Store.Pool().Exec(ctx, `
			INSERT INTO transactions (id, organization_id, sub_organization_id, type, status, order_reference, locker_number,
			                          tower_name, location_name, city, pin_code, created_at, completed_at)
			VALUES ($1, $2, $3, $4, 'completed', $5, $6, $7, $8, $9, $10, $11, $11)`,
			id, org, sub, typ, ref, locker, tower, location, city, zip, at)
		require.NoError(t, err)
		return id
	}
	sub := e.Creds.SubOrganizationID
	var ids []uuid.UUID
	for i := range 25 {
		typ := "dropoff"
		if i%2 == 1 {
			typ = "pickup"
		}
		var s *int64
		if i < 10 {
			s = &sub
		}
		ids = append(ids, insert(e.Creds.OrganizationID, s, typ, fmt.Sprintf("order-%d", i), fmt.Sprint(i%5), "Union Station tower 1",
			"Union Station", "Los Angeles", "90012", base.Add(time.Duration(i)*time.Minute)))
	}
	// Two rows at the same instant: the id breaks the tie, the same way on every page.
	tieA := insert(e.Creds.OrganizationID, nil, "dropoff", "tie", "1", "T", "Pasadena Old Town", "Pasadena", "91105", base.Add(time.Hour))
	tieB := insert(e.Creds.OrganizationID, nil, "dropoff", "tie", "1", "T", "Pasadena Old Town", "Pasadena", "91105", base.Add(time.Hour))
	insert(other.OrgID, nil, "dropoff", "order-1", "1", "X", "Rival Union Station", "Los Angeles", "90012", base)

	admin := e.Creds.AppEngineAPIKey
	list := func(t *testing.T, key, query string) (int, map[string]any) {
		r := doKey(t, e, http.MethodGet, "/dropoff/organization/transactions?"+query, key, nil)
		if r.Status != http.StatusOK {
			return r.Status, nil
		}
		return r.Status, r.Map(t)
	}

	status, page := list(t, admin, "type=&order_reference=&pickup_code=&locker_number=&tower_name=&location=&city=&pin_code=&page_size=&page_number=")
	require.Equal(t, http.StatusOK, status)
	assert.EqualValues(t, 27, page["total_count"], "empty filters filter nothing; another organization's rows never show")
	assert.EqualValues(t, 20, page["page_size"])
	assert.EqualValues(t, 2, page["total_pages"])
	data := page["data"].([]any)
	require.Len(t, data, 20)
	first, second := data[0].(map[string]any), data[1].(map[string]any)
	hi, lo := tieA.String(), tieB.String()
	if lo > hi {
		hi, lo = lo, hi
	}
	assert.Equal(t, hi, first["id"], "newest first, higher id first on a tie")
	assert.Equal(t, lo, second["id"])
	for _, k := range []string{"id", "type", "order_reference", "pickup_code", "locker_number", "tower_name", "location", "city", "pin_code", "status", "created_at", "completed_at"} {
		assert.Contains(t, first, k)
	}

	for _, c := range []struct {
		query string
		count int
	}{
		{"type=pickup", 12},
		{"type=dropoff&location=union%20station", 13},
		{"order_reference=order-3", 1},
		{"locker_number=2", 5},
		{"city=PASADENA", 2},
		{"pin_code=91105", 2},
		{"tower_name=union%20station%20tower%201&type=dropoff", 13},
		{"pickup_code=123456", 0},
	} {
		status, page := list(t, admin, c.query)
		require.Equal(t, http.StatusOK, status, c.query)
		assert.EqualValues(t, c.count, page["total_count"], c.query)
	}

	// Paging: page 2 holds the rest; past the end is an empty page, not an error.
	_, p2 := list(t, admin, "page_size=20&page_number=2")
	assert.Len(t, p2["data"], 7)
	_, p9 := list(t, admin, "page_size=20&page_number=9")
	assert.Empty(t, p9["data"])
	assert.EqualValues(t, 27, p9["total_count"])
	_, p5 := list(t, admin, "page_size=5&page_number=1")
	assert.EqualValues(t, 6, p5["total_pages"])

	for _, q := range []string{"page_size=abc", "page_number=x", "page_size=0", "page_size=101", "page_number=0", "page_number=-1", "page_size=1.5"} {
		status, _ := list(t, admin, q)
		assert.Equal(t, http.StatusUnprocessableEntity, status, q)
	}

	// A sub-organization key sees its sub-organization's transactions only.
	r := doKey(t, e, http.MethodPost, "/auth/api-key", admin, map[string]any{"client_id": e.Creds.ServiceProvider.ClientID,
		"client_secret": e.Creds.ServiceProvider.ClientSecret, "organization_id": e.Creds.OrganizationID, "sub_organization_id": sub})
	require.Equal(t, http.StatusOK, r.Status)
	subKey := r.Map(t)["api_key"].(string)
	_, page = list(t, subKey, "")
	assert.EqualValues(t, 10, page["total_count"])
	_ = ids

	// pickup_code filters that match nothing count as wrong codes: the key that would try
	// the 10⁴ codes behind "****42" is stopped after 10, and told when to come back.
	// Other filters, and other keys, go on working.
	for i := range 9 { // the sub key's first nine misses (the admin key's miss above is its own)
		status, page := list(t, subKey, fmt.Sprintf("pickup_code=%06d", 100000+i))
		require.Equal(t, http.StatusOK, status, "miss %d", i+1)
		assert.EqualValues(t, 0, page["total_count"])
	}
	status, _ = list(t, subKey, "pickup_code=999999")
	require.Equal(t, http.StatusOK, status, "the tenth miss is still judged")
	r = doKey(t, e, http.MethodGet, "/dropoff/organization/transactions?pickup_code=000042", subKey, nil)
	requireProblem(t, r, http.StatusTooManyRequests)
	retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After: %q", r.Header.Get("Retry-After"))
	assert.Positive(t, retry)
	status, page = list(t, subKey, "type=dropoff")
	require.Equal(t, http.StatusOK, status, "filters without pickup_code are not limited")
	assert.Positive(t, page["total_count"])
	status, _ = list(t, admin, "pickup_code=000042")
	assert.Equal(t, http.StatusOK, status, "another key has its own count")
}
