package apiserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/dev/testenv"
	"github.com/lockernet/lockernet/internal/jwtauth"
)

// Every operation of the served OpenAPI spec, every parameter set to malformed values, and
// malformed bodies: no answer is a 5xx (but the gateway cloud's documented gateway outcomes)
// and every error body is the surface's own (DESIGN §8).
func TestMalformedInputOnEveryOperation(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Temporal")
	}
	t.Parallel()
	e := testenv.Start(t, testenv.Options{})
	r := e.Do(http.MethodGet, "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	var spec struct {
		Paths map[string]map[string]struct {
			OperationID string                      `json:"operationId"`
			Parameters  []struct{ Name, In string } `json:"parameters"`
			RequestBody *struct {
				Content map[string]any `json:"content"`
			} `json:"requestBody"`
			Security []map[string][]string `json:"security"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &spec))

	bearer := demoToken(t, e, jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess)
	// Raw values; each is escaped for where it goes.
	values := []string{"", " ", "\x00", "\xff\xfe", "-1", "0", "99999999999999999999999", "1e309", "NaN", "abc",
		"'; DROP TABLE lockers; --", "../../etc/passwd", "null", "{}", strings.Repeat("9", 3000), "\u202e", "a/b?c#d"}
	bodies := []string{"", "{", "[]", "null", "42", `"text"`, `{"a":`, `{"x": 1e999}`, strings.Repeat("[", 10000),
		`{"id": {}, "locationId": [], "lockerTypeId": "x", "duration": -5, "userId": 7, "location_id": {}, "access_code": [1]}`}
	paths := make([]string, 0, len(spec.Paths))
	for p := range spec.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	n := 0
	for _, path := range paths {
		for method, op := range spec.Paths[path] {
			method = strings.ToUpper(method)
			headers := map[string]string{"Prefer": "respond-async"}
			for _, req := range op.Security {
				for scheme := range req {
					switch scheme {
					case "bearer":
						headers["Authorization"] = "Bearer " + bearer
					case "appKey":
						headers["x-api-key"] = e.Creds.AppEngineAPIKey
					case "gatewayApiKey":
						headers["X-API-Key"] = e.Creds.GatewayAPIKey
					}
				}
			}
			call := func(what, p string, body *string, extra map[string]string) {
				t.Helper()
				n++
				h := http.Header{}
				for k, v := range headers {
					h.Set(k, v)
				}
				for k, v := range extra {
					h.Set(k, v)
				}
				var rd *strings.Reader
				if body != nil {
					h.Set("Content-Type", "application/json")
					rd = strings.NewReader(*body)
				} else {
					rd = strings.NewReader("")
				}
				resp := send(t, method, e.URL+p, h, rd)
				where := fmt.Sprintf("%s %s (%s): %d %s", method, p, what, resp.Status, truncate(resp.Body))
				gatewayOutcome := strings.HasPrefix(p, "/api/customer/v1") && (resp.Status == 502 || resp.Status == 503 || resp.Status == 504)
				if !gatewayOutcome {
					assert.Less(t, resp.Status, 500, where)
				}
				if resp.Status >= 400 {
					requireSurfaceError(t, p, resp, where)
				}
			}
			// Path and query parameters, one at a time, the others left valid-looking.
			for _, prm := range op.Parameters {
				if prm.In != "path" && prm.In != "query" && prm.In != "header" {
					continue
				}
				for _, v := range values {
					switch prm.In {
					case "query":
						call("query "+prm.Name, fillPath(path, "", "")+"?"+url.QueryEscape(prm.Name)+"="+url.QueryEscape(v), nil, nil)
					case "header":
						if !isHeaderSafe(v) {
							continue // net/http refuses these bytes before any handler (its plain-text 400)
						}
						call("header "+prm.Name, fillPath(path, "", ""), nil, map[string]string{prm.Name: v})
					default:
						call("path "+prm.Name, fillPath(path, prm.Name, url.PathEscape(v)), nil, nil)
					}
				}
			}
			if op.RequestBody != nil {
				for _, b := range bodies {
					call("body", fillPath(path, "", ""), &b, nil)
				}
			}
		}
	}
	t.Logf("%d malformed requests on %d paths", n, len(paths))
}

// fillPath puts v in the parameter name and a plausible value in every other one.
func fillPath(path, name, v string) string {
	out := path
	for {
		i := strings.Index(out, "{")
		if i < 0 {
			return out
		}
		j := strings.Index(out[i:], "}")
		prm := out[i+1 : i+j]
		val := "1"
		if prm == name {
			val = v
		} else if strings.Contains(prm, "tower") {
			val = "0100000000000011"
		} else if strings.HasSuffix(prm, "id") && !strings.Contains(prm, "location") && !strings.Contains(prm, "locker") {
			val = "7d1c2f1e-9b7a-4c1e-8f4e-2b9c1d0e5a6f"
		}
		out = out[:i] + val + out[i+j+1:]
	}
}

func isHeaderSafe(v string) bool {
	for _, c := range []byte(v) {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// requireSurfaceError checks that an error answer is the body its surface documents.
func requireSurfaceError(t *testing.T, path string, r testenv.Response, where string) {
	t.Helper()
	var m map[string]any
	if !assert.NoError(t, json.Unmarshal(r.Body, &m), "not JSON: %s", where) {
		return
	}
	switch {
	case strings.HasPrefix(path, "/api/customer/v1"):
		assert.IsType(t, "", m["error"], "gateway cloud error body: %s", where)
		assert.IsType(t, "", m["message"], "gateway cloud error body: %s", where)
	case strings.HasPrefix(path, "/oauth/") || strings.HasPrefix(path, "/realms/"):
		assert.IsType(t, "", m["error"], "OAuth error body: %s", where)
	default:
		assert.IsType(t, "", m["detail"], "problem body: %s", where)
		assert.EqualValues(t, r.Status, m["status"], "problem body: %s", where)
	}
}
