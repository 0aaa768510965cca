package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
)

// Gateway-request workflow names.
const (
	GatewayRequestWorkflowName = "GatewayRequest"
	// QueryGatewayRequestState answers the request's current GatewayRequestState.
	QueryGatewayRequestState = "state"
)

// Kinds of gateway request whose re-sending the workflow treats specially; the apiserver
// names every operation's kind.
const (
	// KindCreateTransaction may be re-sent after a lost answer: it always carries a
	// transactionId, and the gateway answers a repeat with 409 and that same transaction.
	KindCreateTransaction = "create-transaction"
	// KindUpdateLocker may be re-sent after a lost answer: it sets an absolute state.
	KindUpdateLocker = "update-locker"
)

// Error codes of the local API the workflow reads (hardware/gateway's codes).
const (
	gatewayCodeAuthFailed         = "GATEWAY_AUTH_FAILED"
	gatewayCodeTransactionExists  = "TRANSACTION_EXISTS"
	gatewayCodeAssignmentConflict = "LOCKER_ASSIGNMENT_CONFLICT"
)

// Error codes of the terminal states other than completed (DESIGN §6.2).
const (
	CodeGatewayRejected     = "GATEWAY_REJECTED"
	CodeDispatchFailed      = "DISPATCH_FAILED"
	CodeGatewayUnresponsive = "GATEWAY_UNRESPONSIVE"
)

// GatewayRequestWorkflowID is the workflow ID of a gateway request.
func GatewayRequestWorkflowID(requestID string) string { return "gateway-request/" + requestID }

// GatewayPolicy is how a request is dispatched; the apiserver fills it from its settings
// and it is recorded with the run, so a change of settings never alters a run in flight.
// Zero fields take DefaultGatewayPolicy's.
type GatewayPolicy struct {
	// CallTimeout is the deadline for an answer to a read or write once delivered (10 s).
	CallTimeout time.Duration
	// HardwareTimeout is the deadline for a hardware call: it covers the gateway's own open
	// policy of 3 attempts of 20 s, 1 s apart (65 s).
	HardwareTimeout time.Duration
	// DispatchAttempts is the dispatch budget: how many times delivery is tried (3).
	DispatchAttempts int
	// DispatchBackoff is the pause after the first failed delivery, doubled after each (500 ms).
	DispatchBackoff time.Duration
	// ConflictRetries is how often a create answered 503 LOCKER_ASSIGNMENT_CONFLICT is
	// retried (3), ConflictBackoff the pause before each (200 ms).
	ConflictRetries int
	ConflictBackoff time.Duration
}

// DefaultGatewayPolicy is DESIGN §6.2's policy.
func DefaultGatewayPolicy() GatewayPolicy {
	return GatewayPolicy{
		CallTimeout: 10 * time.Second, HardwareTimeout: 65 * time.Second,
		DispatchAttempts: 3, DispatchBackoff: 500 * time.Millisecond,
		ConflictRetries: 3, ConflictBackoff: 200 * time.Millisecond,
	}
}

// WithDefaults fills the zero fields from DefaultGatewayPolicy.
func (p GatewayPolicy) WithDefaults() GatewayPolicy {
	d := DefaultGatewayPolicy()
	if p.CallTimeout <= 0 {
		p.CallTimeout = d.CallTimeout
	}
	if p.HardwareTimeout <= 0 {
		p.HardwareTimeout = d.HardwareTimeout
	}
	if p.DispatchAttempts <= 0 {
		p.DispatchAttempts = d.DispatchAttempts
	}
	if p.DispatchBackoff <= 0 {
		p.DispatchBackoff = d.DispatchBackoff
	}
	if p.ConflictRetries < 0 {
		p.ConflictRetries = 0
	} else if p.ConflictRetries == 0 {
		p.ConflictRetries = d.ConflictRetries
	}
	if p.ConflictBackoff <= 0 {
		p.ConflictBackoff = d.ConflictBackoff
	}
	return p
}

// Timeout is the deadline of one call of the class.
func (p GatewayPolicy) Timeout(class string) time.Duration {
	if class == activities.ClassHardware {
		return p.HardwareTimeout
	}
	return p.CallTimeout
}

// GatewayRequestInput starts a gateway-request workflow.
type GatewayRequestInput struct {
	RequestID      string
	OrganizationID int64
	LocationID     int64
	GatewayID      int64
	GatewaySerial  string
	Kind           string
	// Class is read, write or hardware (activities.Class*).
	Class  string
	Method string
	// Path is the gateway local-API path with its query.
	Path   string
	Body   []byte
	Policy GatewayPolicy
}

// GatewayRequestState is the workflow's answer to QueryGatewayRequestState.
type GatewayRequestState struct {
	Status    string
	Attempts  int
	UpdatedAt time.Time
	// LastError says why the last send did not settle the request, if it did not.
	LastError string
}

// GatewayRequestResult is the terminal outcome, exactly as stored in Postgres.
type GatewayRequestResult struct {
	Outcome     activities.GatewayOutcome
	Attempts    int
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time
}

// GatewayRequest forwards one call of the gateway cloud API to its gateway and settles it in
// exactly one terminal state (DESIGN §6.2):
//
//   - completed: the gateway answered with its API's own response (2xx, or 4xx other than
//     its 401 GATEWAY_AUTH_FAILED), kept verbatim;
//   - rejected (502): it answered 5xx (a read is re-sent once first; a create's 503
//     LOCKER_ASSIGNMENT_CONFLICT is retried with short backoff first), something that is not
//     its API's JSON, or 401 GATEWAY_AUTH_FAILED;
//   - dispatch_failed (503): nothing could be delivered within the dispatch budget;
//   - gateway_unresponsive (504): delivered, but no answer within the deadline. Hardware
//     calls are never re-sent once delivered; a read, a create (same transactionId) or a
//     locker update is re-sent once.
//
// The last activity writes the outcome to Postgres; the workflow's result is that row.
func GatewayRequest(ctx workflow.Context, in GatewayRequestInput) (GatewayRequestResult, error) {
	wf := &gatewayRequestImpl{}
	if err := wf.setup(ctx, in); err != nil {
		return GatewayRequestResult{}, err
	}
	return wf.run(ctx)
}

type gatewayRequestImpl struct {
	in     GatewayRequestInput
	policy GatewayPolicy
	state  GatewayRequestState
}

func (wf *gatewayRequestImpl) setup(ctx workflow.Context, in GatewayRequestInput) error {
	if in.RequestID == "" || in.Method == "" || in.Path == "" {
		return temporal.NewNonRetryableApplicationError("request id, method and path are required", "InvalidInput", nil)
	}
	switch in.Class {
	case activities.ClassRead, activities.ClassWrite, activities.ClassHardware:
	default:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown class %q", in.Class), "InvalidInput", nil)
	}
	wf.in, wf.policy = in, in.Policy.WithDefaults()
	wf.state = GatewayRequestState{Status: activities.StatePending, UpdatedAt: workflow.Now(ctx)}
	return workflow.SetQueryHandler(ctx, QueryGatewayRequestState, func() (GatewayRequestState, error) {
		return wf.state, nil
	})
}

// resendableAfterNoAnswer says whether a delivered but unanswered request may go out again.
func (wf *gatewayRequestImpl) resendableAfterNoAnswer() bool {
	return wf.in.Class == activities.ClassRead || wf.in.Kind == KindCreateTransaction || wf.in.Kind == KindUpdateLocker
}

func (wf *gatewayRequestImpl) run(ctx workflow.Context) (GatewayRequestResult, error) {
	logger := workflow.GetLogger(ctx)
	timeout := wf.policy.Timeout(wf.in.Class)
	// Both activities are local activities: they run inside the workflow task on the worker
	// that holds it, without a round trip through the server per activity, so a request
	// that the gateway answers at once settles in a single workflow task (with eager start,
	// the one that came back with the start call). A worker that stops during a send loses
	// its workflow task; the next worker runs the send again, finds it begun and answers
	// SendUnknown instead of sending it twice.
	sendCtx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		// One send: the call's deadline plus room to record it.
		StartToCloseTimeout: timeout + 15*time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{"InvalidInput", activities.ErrTypeGatewayMisconfigured},
		},
	})

	var (
		send             int
		dispatchFailures int
		serverResends    int  // reads re-sent after a 5xx
		conflictRetries  int  // creates retried after 503 LOCKER_ASSIGNMENT_CONFLICT
		noAnswerResends  int  // re-sends after a delivered send got no answer
		mayHaveArrived   bool // an earlier send may have reached the gateway
		answered         bool
	)
	for {
		send++
		var res activities.SendGatewayRequestResult
		err := workflow.ExecuteLocalActivity(sendCtx, a.SendGatewayRequest, activities.SendGatewayRequestInput{
			RequestID: wf.in.RequestID, Send: send, Method: wf.in.Method, Path: wf.in.Path, Body: wf.in.Body, Timeout: timeout,
		}).Get(ctx, &res)
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeGatewayMisconfigured {
			return wf.finish(ctx, dispatchFailed(appErr.Message()), false, false)
		}
		if err != nil {
			return GatewayRequestResult{}, err
		}
		wf.state.Attempts = max(wf.state.Attempts, res.Attempts)
		wf.state.UpdatedAt = workflow.Now(ctx)

		switch res.Outcome {
		case activities.SendFinished:
			// Another run stored the outcome already; finishing returns it.
			return wf.finish(ctx, unresponsive(0, "the request was settled elsewhere"), false, false)

		case activities.SendNotDelivered:
			dispatchFailures++
			wf.state.Status, wf.state.LastError = activities.StatePending, res.Error
			if dispatchFailures >= wf.policy.DispatchAttempts {
				return wf.finish(ctx, dispatchFailed(res.Error), false, !mayHaveArrived && !answered)
			}
			backoff := wf.policy.DispatchBackoff << (dispatchFailures - 1)
			logger.Info("gateway request not delivered; retrying", "attempt", dispatchFailures, "backoff", backoff, "err", res.Error)
			if err := workflow.Sleep(ctx, backoff); err != nil {
				return GatewayRequestResult{}, err
			}
			continue

		case activities.SendNoAnswer, activities.SendUnknown:
			wf.state.Status, wf.state.LastError = activities.StateDispatched, res.Error
			if res.Outcome == activities.SendUnknown {
				wf.state.LastError = "the send was interrupted; its answer is unknown"
			}
			mayHaveArrived = true
			if wf.resendableAfterNoAnswer() && noAnswerResends == 0 {
				noAnswerResends++
				logger.Info("gateway request unanswered; re-sending once", "outcome", res.Outcome)
				continue
			}
			return wf.finish(ctx, unresponsive(timeout, wf.state.LastError), false, false)

		case activities.SendAnswered:
			answered = true
			wf.state.Status = activities.StateDispatched
			if o, done := wf.decide(res, mayHaveArrived); done {
				return wf.finish(ctx, o, true, false)
			}
			if wf.in.Class == activities.ClassRead && res.Status >= 500 && serverResends == 0 {
				serverResends++
				wf.state.LastError = fmt.Sprintf("gateway answered %d", res.Status)
				logger.Info("gateway answered a read with a server error; re-sending once", "status", res.Status)
				continue
			}
			if wf.in.Kind == KindCreateTransaction && res.Status == http.StatusServiceUnavailable &&
				res.ErrorCode == gatewayCodeAssignmentConflict && conflictRetries < wf.policy.ConflictRetries {
				conflictRetries++
				wf.state.LastError = gatewayCodeAssignmentConflict
				if err := workflow.Sleep(ctx, wf.policy.ConflictBackoff*time.Duration(conflictRetries)); err != nil {
					return GatewayRequestResult{}, err
				}
				continue
			}
			return wf.finish(ctx, rejected(res), true, false)

		default:
			return GatewayRequestResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("unknown send outcome %q", res.Outcome), "InvalidOutcome", nil)
		}
	}
}

// decide settles an answer that needs no retry: completed, or rejected outright. done is
// false for 5xx answers, which the caller may retry.
func (wf *gatewayRequestImpl) decide(res activities.SendGatewayRequestResult, mayHaveArrived bool) (activities.GatewayOutcome, bool) {
	switch {
	case !res.APIJSON:
		o := rejected(res)
		o.ErrorMessage = "the gateway answered with something other than its API's JSON"
		return o, true
	case res.Status < 200 || (res.Status >= 300 && res.Status < 400):
		// The local API answers 2xx, 4xx or 5xx; a redirect comes from something in between.
		o := rejected(res)
		o.ErrorMessage = fmt.Sprintf("the gateway answered %d, which its API never does", res.Status)
		return o, true
	case res.Status == http.StatusUnauthorized && res.ErrorCode == gatewayCodeAuthFailed:
		o := rejected(res)
		o.ErrorMessage = "the gateway refused the cloud's credential"
		return o, true
	case res.Status == http.StatusConflict && res.ErrorCode == gatewayCodeTransactionExists &&
		wf.in.Kind == KindCreateTransaction && mayHaveArrived:
		if body, ok := sameTransaction(wf.in.Body, res.Body); ok {
			// The earlier, unanswered send created it: this is the original 201.
			return activities.GatewayOutcome{Status: activities.StateCompleted, HTTPStatus: http.StatusCreated,
				Headers: map[string]string{"Content-Type": "application/json"}, Body: body}, true
		}
	}
	if res.Status >= 500 {
		return activities.GatewayOutcome{}, false
	}
	return activities.GatewayOutcome{Status: activities.StateCompleted, HTTPStatus: res.Status, Headers: res.Headers, Body: res.Body}, true
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

func rejected(res activities.SendGatewayRequestResult) activities.GatewayOutcome {
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
	return activities.GatewayOutcome{Status: activities.StateRejected, HTTPStatus: http.StatusBadGateway,
		ErrorCode: CodeGatewayRejected, ErrorMessage: msg, Details: details}
}

func dispatchFailed(cause string) activities.GatewayOutcome {
	return activities.GatewayOutcome{Status: activities.StateDispatchFailed, HTTPStatus: http.StatusServiceUnavailable,
		ErrorCode: CodeDispatchFailed, ErrorMessage: "the request could not be delivered to the gateway",
		Details: map[string]any{"gatewayStatus": nil, "error": cause}}
}

func unresponsive(timeout time.Duration, cause string) activities.GatewayOutcome {
	details := map[string]any{"gatewayStatus": nil, "error": cause}
	if timeout > 0 {
		details["timeoutSeconds"] = timeout.Seconds()
	}
	return activities.GatewayOutcome{Status: activities.StateGatewayUnresponsive, HTTPStatus: http.StatusGatewayTimeout,
		ErrorCode: CodeGatewayUnresponsive, ErrorMessage: "the gateway did not answer in time", Details: details}
}

// finish writes the outcome to Postgres and returns it as stored.
func (wf *gatewayRequestImpl) finish(ctx workflow.Context, o activities.GatewayOutcome, answered, unreachable bool) (GatewayRequestResult, error) {
	actx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			NonRetryableErrorTypes: []string{"InvalidInput"},
		},
	})
	if o.Status != activities.StateCompleted {
		o.Details["attempts"] = wf.state.Attempts
	}
	var res activities.FinishGatewayRequestResult
	err := workflow.ExecuteLocalActivity(actx, a.FinishGatewayRequest, activities.FinishGatewayRequestInput{
		RequestID: wf.in.RequestID, Class: wf.in.Class, Outcome: o, GatewayAnswered: answered, GatewayUnreachable: unreachable,
	}).Get(ctx, &res)
	if err != nil {
		return GatewayRequestResult{}, err
	}
	wf.state = GatewayRequestState{Status: res.Outcome.Status, Attempts: res.Attempts, UpdatedAt: res.UpdatedAt, LastError: wf.state.LastError}
	if res.UsedCode != "" {
		// A single-use access code opened its locker: its workflow releases the hold. A
		// workflow that is already over has nothing left to release.
		_ = workflow.SignalExternalWorkflow(ctx, AccessCodeWorkflowID(res.UsedCode), "", SignalCodeEnded, "used").Get(ctx, nil)
	}
	return GatewayRequestResult{Outcome: res.Outcome, Attempts: res.Attempts, CreatedAt: res.CreatedAt,
		UpdatedAt: res.UpdatedAt, CompletedAt: res.CompletedAt}, nil
}
