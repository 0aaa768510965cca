package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/internal/dev/gatewaytest"
)

// timestampPattern is RFC 3339, UTC, milliseconds (§8).
var timestampPattern = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

type reply struct {
	status int
	header http.Header
	body   []byte
}

// call sends an authenticated request over HTTP and reads the answer.
func call(t *testing.T, gw *gatewaytest.Gateway, method, path string, body any) reply {
	t.Helper()
	return callWithSecret(t, gw, gw.Secret, method, path, body)
}

func callWithSecret(t *testing.T, gw *gatewaytest.Gateway, secret, method, path string, body any) reply {
	t.Helper()
	resp, data, err := gw.DoWithSecret(t.Context(), secret, method, path, body)
	require.NoError(t, err, "%s %s", method, path)
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// send sends req as it is and reads the answer.
func send(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

// requireError checks an Error body and returns it.
func requireError(t *testing.T, r reply, status int, code string) gateway.ErrorBody {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	e := decode[gateway.ErrorBody](t, r)
	assert.Equal(t, code, e.Error, "body: %s", r.body)
	assert.NotEmpty(t, e.Message)
	assert.Regexp(t, timestampPattern, e.Timestamp)
	assert.NotNil(t, e.Details, "details is always an object")
	return e
}

func createTransaction(t *testing.T, gw *gatewaytest.Gateway, body any) gateway.TransactionResponse {
	t.Helper()
	r := call(t, gw, http.MethodPost, "/transactions", body)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	return decode[gateway.TransactionResponse](t, r)
}

func setOutOfService(t *testing.T, gw *gatewaytest.Gateway, lockerID int, out bool) {
	t.Helper()
	r := call(t, gw, http.MethodPatch, "/lockers/"+itoa(lockerID), map[string]any{"outOfService": out})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
}

func itoa(n int) string { return jsonNumber(n) }

func jsonNumber(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// badBody is a request body the gateway refuses: the answer's status and error code,
// and the field the error names (none when empty).
type badBody struct {
	name   string
	body   []byte
	status int
	code   string
	field  string
}

// checkBadBodies sends each body to path with method, each in a subtest, and checks
// how the gateway refuses it.
func checkBadBodies(t *testing.T, gw *gatewaytest.Gateway, method, path string, bad []badBody) {
	t.Helper()
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			e := requireError(t, call(t, gw, method, path, tc.body), tc.status, tc.code)
			if tc.field != "" {
				assert.Equal(t, tc.field, e.Details["field"])
			}
		})
	}
}
