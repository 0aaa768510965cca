package gatewayreq_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/gatewayreq"
)

func TestPolicyWithDefaults(t *testing.T) {
	t.Parallel()
	assert.Equal(t, gatewayreq.DefaultPolicy(), gatewayreq.Policy{}.WithDefaults(), "a zero policy is DESIGN §6.2's")

	set := gatewayreq.Policy{CallTimeout: 3 * time.Second, HardwareTimeout: 5 * time.Second, DispatchAttempts: 5,
		DispatchBackoff: 50 * time.Millisecond, ConflictRetries: 1, ConflictBackoff: 20 * time.Millisecond}
	assert.Equal(t, set, set.WithDefaults(), "fields that are set are kept")

	none := gatewayreq.Policy{ConflictRetries: -1}.WithDefaults()
	assert.Equal(t, 0, none.ConflictRetries, "a negative conflict budget means no retries")
	assert.Equal(t, 10*time.Second, none.CallTimeout)
}

func TestPolicyTimeoutByClass(t *testing.T) {
	t.Parallel()
	p := gatewayreq.DefaultPolicy()
	assert.Equal(t, 10*time.Second, p.Timeout(gatewayreq.ClassRead))
	assert.Equal(t, 10*time.Second, p.Timeout(gatewayreq.ClassWrite))
	assert.Equal(t, 65*time.Second, p.Timeout(gatewayreq.ClassHardware))
}

// The spec is the gateway-request workflow's input: its JSON is in every recorded history,
// so its field names must not change.
func TestSpecWireShape(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(gatewayreq.Spec{Policy: gatewayreq.DefaultPolicy()})
	require.NoError(t, err)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &got))
	assert.ElementsMatch(t, []string{"RequestID", "OrganizationID", "LocationID", "GatewayID", "GatewaySerial", "Kind", "Class",
		"Method", "Path", "Body", "Policy"}, keys(got))
	var policy map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(got["Policy"], &policy))
	assert.ElementsMatch(t, []string{"CallTimeout", "HardwareTimeout", "DispatchAttempts", "DispatchBackoff", "ConflictRetries",
		"ConflictBackoff"}, keys(policy))

	b, err = json.Marshal(gatewayreq.Result{})
	require.NoError(t, err)
	got = nil
	require.NoError(t, json.Unmarshal(b, &got))
	assert.ElementsMatch(t, []string{"Outcome", "Attempts", "CreatedAt", "UpdatedAt", "CompletedAt"}, keys(got))
}

func TestSearchKind(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "gateway:GW-0001:open-locker", gatewayreq.SearchKind("GW-0001", gatewayreq.KindOpenLocker))
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestOpenedReadsTheDoor(t *testing.T) {
	t.Parallel()
	completed := func(status int, body string) gatewayreq.Outcome {
		return gatewayreq.Outcome{Status: gatewayreq.StateCompleted, HTTPStatus: status, Body: []byte(body)}
	}
	assert.True(t, gatewayreq.Opened(completed(200, `{"success":true,"doorOpen":true}`)))
	assert.True(t, gatewayreq.Opened(completed(204, "")), "a 2xx that says nothing of the door")
	assert.False(t, gatewayreq.Opened(completed(200, `{"success":false,"message":"jammed"}`)))
	assert.False(t, gatewayreq.Opened(completed(409, `{"error":"LOCKER_OUT_OF_SERVICE"}`)))
	assert.False(t, gatewayreq.Opened(gatewayreq.Outcome{Status: gatewayreq.StateGatewayUnresponsive, HTTPStatus: 504}))

	d := gatewayreq.ReadDoor(completed(200, `{"success":false,"doorOpen":true,"message":"jammed"}`))
	require.NotNil(t, d.Success)
	assert.Equal(t, gatewayreq.Door{Success: d.Success, DoorOpen: true, Message: "jammed"}, d)
	assert.False(t, *d.Success)
}
