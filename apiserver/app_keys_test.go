package apiserver_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
)

func doKey(t *testing.T, e *testenv.Env, method, path, key string, body any) testenv.Response {
	t.Helper()
	return testenv.DoWithHeaders(t, method, e.URL+path, map[string]string{"x-api-key": key}, body)
}

func TestAppEngineKeys(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	admin := e.Creds.AppEngineAPIKey
	require.True(t, strings.HasPrefix(admin, "lna_"), "the seed prints a bootstrap admin key")
	sp := e.Creds.ServiceProvider

	t.Run("missing or unknown key", func(t *testing.T) {
		for _, key := range []string{"", "lna_" + strings.Repeat("0", 64), "nonsense", strings.Repeat("x", 300)} {
			r := doKey(t, e, http.MethodGet, "/auth/api-key", key, nil)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "key %q", key)
			assert.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
		}
	})

	var subKey, subKeyID string
	t.Run("create, list, delete", func(t *testing.T) {
		r := doKey(t, e, http.MethodPost, "/auth/api-key", admin, map[string]any{"client_id": sp.ClientID, "client_secret": sp.ClientSecret,
			"organization_id": fmt.Sprint(e.Creds.OrganizationID), "sub_organization_id": e.Creds.SubOrganizationID})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		m := r.Map(t)
		subKey, subKeyID = m["api_key"].(string), m["id"].(string)
		assert.True(t, strings.HasPrefix(subKey, "lna_"))
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, m["created_at"])

		r = doKey(t, e, http.MethodPost, "/auth/api-key", admin, map[string]any{"client_id": sp.ClientID, "client_secret": sp.ClientSecret,
			"organization_id": e.Creds.OrganizationID, "sub_organization_id": ""})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		orgKey := r.Map(t)["api_key"].(string)

		r = doKey(t, e, http.MethodGet, "/auth/api-key", admin, nil)
		require.Equal(t, http.StatusOK, r.Status)
		var all []map[string]any
		r.JSON(t, &all)
		assert.Len(t, all, 3, "bootstrap, sub-organization and org-wide keys")
		for _, k := range all {
			assert.NotContains(t, string(r.Body), subKey, "never the secret")
			assert.Len(t, k["prefix"], 12)
		}
		r = doKey(t, e, http.MethodGet, "/auth/api-key", subKey, nil)
		require.Equal(t, http.StatusOK, r.Status)
		var mine []map[string]any
		r.JSON(t, &mine)
		require.Len(t, mine, 1, "a sub-organization key sees its sub-organization's keys only")
		assert.Equal(t, subKeyID, mine[0]["id"])
		assert.NotNil(t, mine[0]["last_used_at"])

		// Only org-wide keys create and delete.
		r = doKey(t, e, http.MethodPost, "/auth/api-key", subKey, map[string]any{"client_id": sp.ClientID, "client_secret": sp.ClientSecret,
			"organization_id": e.Creds.OrganizationID})
		assert.Equal(t, http.StatusForbidden, r.Status)
		r = doKey(t, e, http.MethodDelete, "/auth/api-key/"+subKeyID, subKey, nil)
		assert.Equal(t, http.StatusForbidden, r.Status)

		r = doKey(t, e, http.MethodDelete, "/auth/api-key/"+subKeyID, orgKey, nil)
		require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
		require.Eventually(t, func() bool {
			return doKey(t, e, http.MethodGet, "/auth/api-key", subKey, nil).Status == http.StatusUnauthorized
		}, 5*time.Second, 100*time.Millisecond, "a deleted key stops validating within 5 s")
		assert.Equal(t, http.StatusNotFound, doKey(t, e, http.MethodDelete, "/auth/api-key/"+subKeyID, orgKey, nil).Status, "already deleted")
		assert.Equal(t, http.StatusNotFound, doKey(t, e, http.MethodDelete, "/auth/api-key/"+uuid.NewString(), orgKey, nil).Status)
		assert.Equal(t, http.StatusUnprocessableEntity, doKey(t, e, http.MethodDelete, "/auth/api-key/not-a-uuid", orgKey, nil).Status)
	})

	t.Run("bad requests", func(t *testing.T) {
		other := e.NewOtherOrg(t)
		base := func() map[string]any {
			return map[string]any{"client_id": sp.ClientID, "client_secret": sp.ClientSecret, "organization_id": e.Creds.OrganizationID}
		}
		cases := []struct {
			name   string
			edit   func(m map[string]any)
			status int
		}{
			{"wrong secret", func(m map[string]any) { m["client_secret"] = "nope" }, http.StatusForbidden},
			{"unknown client", func(m map[string]any) { m["client_id"] = "nobody" }, http.StatusForbidden},
			{"client of another organization", func(m map[string]any) {
				m["client_id"], m["client_secret"] = other.ClientID, other.ClientSecret
			}, http.StatusForbidden},
			{"another organization", func(m map[string]any) { m["organization_id"] = other.OrgID }, http.StatusForbidden},
			{"unknown sub-organization", func(m map[string]any) { m["sub_organization_id"] = 99999 }, http.StatusUnprocessableEntity},
			{"organization id not a number", func(m map[string]any) { m["organization_id"] = "abc" }, http.StatusUnprocessableEntity},
			{"missing client secret", func(m map[string]any) { delete(m, "client_secret") }, http.StatusUnprocessableEntity},
		}
		for _, c := range cases {
			m := base()
			c.edit(m)
			r := doKey(t, e, http.MethodPost, "/auth/api-key", admin, m)
			assert.Equal(t, c.status, r.Status, "%s: %s", c.name, r.Body)
		}
		assert.Equal(t, http.StatusBadRequest, doKey(t, e, http.MethodPost, "/auth/api-key", admin, "{not json").Status)
	})
}
