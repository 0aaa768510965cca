package gatewayreq

import (
	"encoding/json"
	"fmt"
	"time"
)

// The rules by which a gateway's answer settles a request (DESIGN §6.2), in one place for the
// gateway-request workflow, which applies them to every send, and for the first send's
// activity, which settles a request its answer decides at once (Spec.SettleFirstSend). They
// are plain functions of the vocabulary above: deterministic, no I/O.

// Error codes of the gateway local API (hardware/gateway's) that the rules read.
const (
	gatewayCodeAuthFailed         = "GATEWAY_AUTH_FAILED"
	gatewayCodeTransactionExists  = "TRANSACTION_EXISTS"
	gatewayCodeAssignmentConflict = "LOCKER_ASSIGNMENT_CONFLICT"
	// gatewayCodeStopping: the gateway is stopping and did nothing; it is back in seconds.
	gatewayCodeStopping = "GATEWAY_STOPPING"
)

// HTTP statuses of the local API's answers that the rules tell apart. Plain numbers: the
// workflow that applies them does not import net/http.
const (
	gatewayStatusCreated            = 201
	gatewayStatusUnauthorized       = 401
	gatewayStatusConflict           = 409
	gatewayStatusServiceUnavailable = 503
)

// AnswerStep is what a gateway's answer leads to (Spec.AfterAnswer).
type AnswerStep int

const (
	// AnswerSettle: settle the request with the outcome.
	AnswerSettle AnswerStep = iota
	// AnswerResend: a read answered 5xx; send it once more.
	AnswerResend
	// AnswerRetryConflict: a create answered 503 LOCKER_ASSIGNMENT_CONFLICT; retry after a pause.
	AnswerRetryConflict
)

// AfterAnswer decides what the gateway's answer res leads to, given whether an earlier send
// may have reached the gateway and the re-sends and retries made so far: the outcome to
// settle in, or another send.
func (s Spec) AfterAnswer(res SendResult, mayHaveArrived bool, serverResends, conflictRetries int) (Outcome, AnswerStep) {
	if o, done := s.decide(res, mayHaveArrived); done {
		return o, AnswerSettle
	}
	if s.Class == ClassRead && res.Status >= 500 && serverResends == 0 {
		return Outcome{}, AnswerResend
	}
	if s.Kind == KindCreateTransaction && res.Status == gatewayStatusServiceUnavailable &&
		res.ErrorCode == gatewayCodeAssignmentConflict && conflictRetries < s.Policy.WithDefaults().ConflictRetries {
		return Outcome{}, AnswerRetryConflict
	}
	return Rejected(res), AnswerSettle
}

// GatewayStopping says whether res is a stopping gateway's refusal (503 GATEWAY_STOPPING:
// nothing done), which runs of RevisionFirstSendLocal and later send again as a refused
// delivery; runs before it settle it rejected, as they always did.
func (s Spec) GatewayStopping(res SendResult) bool {
	return s.Revision >= RevisionFirstSendLocal && res.Outcome == SendAnswered &&
		res.Status == gatewayStatusServiceUnavailable && res.ErrorCode == gatewayCodeStopping
}

// ResendableAfterNoAnswer says whether a delivered but unanswered request may go out again
// without an idempotency key: a read, a create (it carries its transactionId) or a locker
// update (it sets an absolute state).
func (s Spec) ResendableAfterNoAnswer() bool {
	return s.Class == ClassRead || s.Kind == KindCreateTransaction || s.Kind == KindUpdateLocker
}

// SettleFirstSend says how a request settles from its first send alone, exactly as its
// workflow would settle it: ok with the outcome to store when the gateway's answer decides
// it at once (the common case), false when more is to be done (a re-send, a retry after a
// pause, a send not delivered or not answered), which is the workflow's to do.
func (s Spec) SettleFirstSend(res SendResult) (Outcome, bool) {
	if res.Outcome != SendAnswered || s.GatewayStopping(res) {
		return Outcome{}, false
	}
	o, next := s.AfterAnswer(res, false, 0, 0)
	if next != AnswerSettle {
		return Outcome{}, false
	}
	return o.WithAttempts(res.Attempts), true
}

// WithAttempts is o as stored after attempts sends: a failure's details count them.
func (o Outcome) WithAttempts(attempts int) Outcome {
	if o.Status != StateCompleted {
		o.Details["attempts"] = attempts
	}
	return o
}

// decide settles an answer that needs no retry: completed, rejected outright, or unknown.
// done is false for other 5xx answers, which the caller may retry.
func (s Spec) decide(res SendResult, mayHaveArrived bool) (Outcome, bool) {
	switch {
	case !res.APIJSON:
		o := Rejected(res)
		o.ErrorMessage = "the gateway answered with something other than its API's JSON"
		return o, true
	case res.Status < 200 || (res.Status >= 300 && res.Status < 400):
		// The local API answers 2xx, 4xx or 5xx; a redirect comes from something in between.
		o := Rejected(res)
		o.ErrorMessage = fmt.Sprintf("the gateway answered %d, which its API never does", res.Status)
		return o, true
	case res.Status == gatewayStatusUnauthorized && res.ErrorCode == gatewayCodeAuthFailed:
		o := Rejected(res)
		o.ErrorMessage = "the gateway refused the cloud's credential"
		return o, true
	case res.Status >= 500 && res.ErrorCode == CodeOutcomeUnknown:
		// The gateway cannot tell whether it carried the request out (the door may have
		// moved): never "rejected", and not sent again (it would answer the same).
		return outcomeUnknown(res), true
	case res.Status == gatewayStatusConflict && res.ErrorCode == gatewayCodeTransactionExists &&
		s.Kind == KindCreateTransaction && mayHaveArrived:
		if body, ok := sameTransaction(s.Body, res.Body); ok {
			// The earlier, unanswered send created it: this is the original 201.
			return Outcome{Status: StateCompleted, HTTPStatus: gatewayStatusCreated,
				Headers: map[string]string{"Content-Type": "application/json"}, Body: body}, true
		}
	}
	if res.Status >= 500 {
		return Outcome{}, false
	}
	return Outcome{Status: StateCompleted, HTTPStatus: res.Status, Headers: res.Headers, Body: res.Body,
		BodyInStore: res.BodyInStore}, true
}

// sameTransaction checks that a 409 TRANSACTION_EXISTS names the transaction the request
// created and returns the TransactionResponse the original 201 would have carried.
// encoding/json of plain structs is deterministic; workflowcheck flags its reflection.
//
//workflowcheck:ignore
func sameTransaction(reqBody, conflictBody []byte) ([]byte, bool) {
	var req struct {
		TransactionID string `json:"transactionId"`
	}
	var got struct {
		TransactionID string          `json:"transactionId"`
		LockerID      json.RawMessage `json:"lockerId"`
		CreatedAt     string          `json:"createdAt"`
	}
	if json.Unmarshal(reqBody, &req) != nil || json.Unmarshal(conflictBody, &got) != nil ||
		req.TransactionID == "" || got.TransactionID != req.TransactionID || len(got.LockerID) == 0 {
		return nil, false
	}
	body, err := json.Marshal(struct {
		TransactionID string          `json:"transactionId"`
		LockerID      json.RawMessage `json:"lockerId"`
		CreatedAt     string          `json:"createdAt"`
	}{got.TransactionID, got.LockerID, got.CreatedAt})
	if err != nil {
		return nil, false
	}
	return append(body, '\n'), true
}

// Rejected is the outcome of an answer that says the gateway did not carry the request out.
func Rejected(res SendResult) Outcome {
	details := map[string]any{"gatewayStatus": res.Status}
	if res.ErrorCode != "" {
		details["gatewayError"] = res.ErrorCode
	}
	if res.ErrorMessage != "" {
		details["gatewayMessage"] = res.ErrorMessage
	}
	msg := fmt.Sprintf("the gateway rejected the request (HTTP %d)", res.Status)
	if res.Error != "" {
		details["reason"] = res.Error
	}
	return Outcome{Status: StateRejected, HTTPStatus: HTTPStatusRejected,
		ErrorCode: CodeGatewayRejected, ErrorMessage: msg, Details: details}
}

// outcomeUnknown is the outcome of a gateway answer that says its own outcome is unknown
// (REQUEST_OUTCOME_UNKNOWN): gateway_unresponsive, with the gateway's error and
// "outcome": "unknown" (DESIGN §6.2).
func outcomeUnknown(res SendResult) Outcome {
	details := map[string]any{"gatewayStatus": res.Status, "gatewayError": res.ErrorCode, "outcome": OutcomeUnknown}
	if res.ErrorMessage != "" {
		details["gatewayMessage"] = res.ErrorMessage
	}
	return Outcome{Status: StateGatewayUnresponsive, HTTPStatus: HTTPStatusGatewayUnresponsive,
		ErrorCode: CodeGatewayUnresponsive, ErrorMessage: "the gateway could not tell whether it carried the request out",
		Details: details}
}

// DispatchFailed is the outcome of a request that could not be delivered within the dispatch
// budget, and that no earlier send may have reached.
func DispatchFailed(cause string) Outcome {
	return Outcome{Status: StateDispatchFailed, HTTPStatus: HTTPStatusDispatchFailed,
		ErrorCode: CodeDispatchFailed, ErrorMessage: "the request could not be delivered to the gateway",
		Details: map[string]any{"gatewayStatus": nil, "error": cause}}
}

// Unresponsive is the outcome of a request whose fate the cloud cannot know: delivered (or
// possibly delivered) with no answer within timeout (0: not a deadline). The door may have
// moved: "outcome": "unknown".
func Unresponsive(timeout time.Duration, cause string) Outcome {
	details := map[string]any{"gatewayStatus": nil, "error": cause, "outcome": OutcomeUnknown}
	if timeout > 0 {
		details["timeoutSeconds"] = timeout.Seconds()
	}
	return Outcome{Status: StateGatewayUnresponsive, HTTPStatus: HTTPStatusGatewayUnresponsive,
		ErrorCode: CodeGatewayUnresponsive, ErrorMessage: "the gateway did not answer in time", Details: details}
}
