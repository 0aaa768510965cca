package gatewayreq_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// A first send settles its request alone exactly when the workflow would settle it with that
// answer and nothing else: the activity that made the send then stores the outcome.
func TestSettleFirstSend(t *testing.T) {
	t.Parallel()
	read := gatewayreq.Spec{RequestID: "r", Kind: gatewayreq.KindListLockers, Class: gatewayreq.ClassRead, Revision: gatewayreq.RevisionCurrent}
	open := gatewayreq.Spec{RequestID: "o", Kind: gatewayreq.KindOpenLocker, Class: gatewayreq.ClassHardware, Revision: gatewayreq.RevisionCurrent}
	create := gatewayreq.Spec{RequestID: "c", Kind: gatewayreq.KindCreateTransaction, Class: gatewayreq.ClassWrite, Revision: gatewayreq.RevisionCurrent}
	answer := func(status int, code string) gatewayreq.SendResult {
		return gatewayreq.SendResult{Outcome: gatewayreq.SendAnswered, Status: status, APIJSON: true, ErrorCode: code, Attempts: 1}
	}
	for _, tc := range []struct {
		name    string
		spec    gatewayreq.Spec
		res     gatewayreq.SendResult
		settles bool
		status  string
	}{
		{"a read answered 200", read, answer(200, ""), true, gatewayreq.StateCompleted},
		{"a 4xx is the gateway's own answer", open, answer(404, "LOCKER_NOT_FOUND"), true, gatewayreq.StateCompleted},
		{"a read's 5xx is sent again first", read, answer(500, "INTERNAL_ERROR"), false, ""},
		{"an open's hardware fault", open, answer(500, "HARDWARE_FAULT"), true, gatewayreq.StateRejected},
		{"an open whose outcome the gateway cannot tell", open, answer(500, gatewayreq.CodeOutcomeUnknown), true, gatewayreq.StateGatewayUnresponsive},
		{"a create's assignment conflict is retried first", create, answer(503, "LOCKER_ASSIGNMENT_CONFLICT"), false, ""},
		{"a stopping gateway is sent again", open, answer(503, "GATEWAY_STOPPING"), false, ""},
		{"not delivered", open, gatewayreq.SendResult{Outcome: gatewayreq.SendNotDelivered}, false, ""},
		{"no answer", read, gatewayreq.SendResult{Outcome: gatewayreq.SendNoAnswer}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, ok := tc.spec.SettleFirstSend(tc.res)
			assert.Equal(t, tc.settles, ok)
			assert.Equal(t, tc.status, o.Status)
			if ok && o.Status != gatewayreq.StateCompleted {
				assert.Equal(t, 1, o.Details["attempts"], "a failure counts its sends")
			}
		})
	}

	// Runs of the revision before settle a stopping gateway's refusal rejected, as they did.
	before := open
	before.Revision = gatewayreq.RevisionMarkerless
	o, ok := before.SettleFirstSend(answer(503, "GATEWAY_STOPPING"))
	assert.True(t, ok)
	assert.Equal(t, gatewayreq.StateRejected, o.Status)
}
