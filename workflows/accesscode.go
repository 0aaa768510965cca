package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// Access-code workflow names.
const (
	AccessCodeWorkflowName = "AccessCode"
	// SignalCodeEnded tells the workflow the code ended before its expiry; the argument is
	// the reason (CodeOutcomeRemoved or CodeOutcomeUsed).
	SignalCodeEnded = "code-ended"
	// QueryAccessCodeState answers the workflow's current AccessCodeState.
	QueryAccessCodeState = "state"
)

// Access-code outcomes (AccessCodeState.Outcome). They are recorded in the workflows'
// histories (signals, results, continue-as-new inputs): never change a value.
const (
	CodeOutcomeActive  = "active"
	CodeOutcomeExpired = "expired"
	CodeOutcomeRemoved = "removed"
	CodeOutcomeUsed    = "used"
)

// AccessCodeWorkflowID is the workflow ID of an access code.
func AccessCodeWorkflowID(codeID string) string { return "access-code/" + codeID }

// AccessCodeInput starts an access code's workflow.
type AccessCodeInput struct {
	CodeID    string
	ExpiresAt time.Time
	// HoldRequestID is the gateway request that created the code's hold, when the
	// apiserver stopped waiting for it: the workflow waits for it to settle before
	// releasing, so a late hold is never left behind.
	HoldRequestID string
	// Ended: the code never became active (its hold did not settle in time); only the
	// release remains.
	Ended bool
	// Set when a run that was still releasing continued as new: the code's outcome, the
	// release attempts made and the back-off reached, so the next run goes on from there.
	Outcome  string        `json:",omitempty"`
	Releases int           `json:",omitempty"`
	Backoff  time.Duration `json:",omitempty"`
}

// AccessCodeState is the workflow's answer to QueryAccessCodeState and its result.
type AccessCodeState struct {
	Outcome  string // CodeOutcomeActive, CodeOutcomeExpired, CodeOutcomeRemoved or CodeOutcomeUsed
	Released bool   // the gateway confirmed the locker's hold is gone
	Releases int    // release attempts (gateway requests) made
}

// AccessCode keeps an access code's lifecycle: an active code holds its locker through a
// gateway transaction (its id is the code's); when the code expires (durable timer), is
// removed or is used up, the workflow releases the hold through a gateway request, trying
// again until the gateway confirms.
func AccessCode(ctx workflow.Context, in AccessCodeInput) (AccessCodeState, error) {
	wf := &accessCodeImpl{state: AccessCodeState{Outcome: CodeOutcomeActive}}
	if err := workflow.SetQueryHandler(ctx, QueryAccessCodeState, func() (AccessCodeState, error) { return wf.state, nil }); err != nil {
		return AccessCodeState{}, err
	}
	return wf.run(ctx, in)
}

type accessCodeImpl struct {
	state AccessCodeState
}

func (wf *accessCodeImpl) run(ctx workflow.Context, in AccessCodeInput) (AccessCodeState, error) {
	waitCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{"InvalidInput"}},
	})
	if in.HoldRequestID != "" {
		// Retried (NotSettled) until the hold's gateway request has its outcome.
		if err := workflow.ExecuteActivity(waitCtx, a.AwaitGatewayRequest, activities.AwaitGatewayRequestInput{RequestID: in.HoldRequestID}).Get(ctx, nil); err != nil {
			return AccessCodeState{}, err
		}
	}
	if in.Ended {
		wf.state.Outcome = CodeOutcomeRemoved
		if in.Outcome != "" {
			wf.state.Outcome, wf.state.Releases = in.Outcome, in.Releases
		}
	} else {
		// Active (the query says so) until the expiry or a signal ends it.
		reason, expired := awaitEnd(ctx, in.ExpiresAt, SignalCodeEnded, "access code expiry")
		switch {
		case expired:
			var res activities.ExpireAccessCodeResult
			if err := workflow.ExecuteActivity(withExpiryActivity(ctx), a.ExpireAccessCode, activities.ExpireAccessCodeInput{CodeID: in.CodeID}).Get(ctx, &res); err != nil {
				return AccessCodeState{}, err
			}
			wf.state.Outcome = CodeOutcomeExpired
			if !res.Expired {
				wf.state.Outcome = res.Status // it ended otherwise just before the timer
			}
		case reason == CodeOutcomeUsed:
			wf.state.Outcome = CodeOutcomeUsed
		default:
			wf.state.Outcome = CodeOutcomeRemoved
		}
	}
	return wf.release(ctx, waitCtx, in)
}

// release sends DELETE /transactions/{code id} as a gateway request, and again (backing off
// up to 10 minutes) until the gateway answers that the hold is gone (204, or 404: gone). A
// gateway offline for weeks would grow the history without end: when Temporal suggests it,
// the workflow continues as new, carrying the outcome, the attempts and the back-off.
func (wf *accessCodeImpl) release(ctx, actCtx workflow.Context, in AccessCodeInput) (AccessCodeState, error) {
	backoff := 15 * time.Second
	if in.Backoff > 0 {
		backoff = in.Backoff
	}
	canContinue := workflow.GetVersion(ctx, changeHoldReleaseContinueAsNew, workflow.DefaultVersion, 1) >= 1
	for {
		wf.state.Releases++
		var req gatewayreq.Spec
		if err := workflow.ExecuteActivity(actCtx, a.PrepareHoldRelease, activities.PrepareHoldReleaseInput{CodeID: in.CodeID, Attempt: wf.state.Releases}).Get(ctx, &req); err != nil {
			return AccessCodeState{}, err
		}
		child := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:          GatewayRequestWorkflowID(req.RequestID),
			WorkflowTaskTimeout: gatewayreq.TaskTimeout,
			TypedSearchAttributes: SearchAttrs{OrganizationID: req.OrganizationID, LocationID: req.LocationID,
				RequestKind: gatewayreq.SearchKind(req.GatewaySerial, req.Kind)}.Typed(),
		})
		var res gatewayreq.Result
		if err := workflow.ExecuteChildWorkflow(child, GatewayRequestWorkflowName, req).Get(ctx, &res); err != nil {
			return AccessCodeState{}, err
		}
		if res.Outcome.Status == gatewayreq.StateCompleted && (res.Outcome.HTTPStatus/100 == 2 || res.Outcome.HTTPStatus == gatewayStatusNotFound) {
			wf.state.Released = true
			return wf.state, nil
		}
		workflow.GetLogger(ctx).Warn("access code hold not released; trying again", "status", res.Outcome.Status,
			"httpStatus", res.Outcome.HTTPStatus, "backoff", backoff)
		if err := workflow.Sleep(ctx, backoff); err != nil {
			return AccessCodeState{}, err
		}
		backoff = min(backoff*2, 10*time.Minute)
		if canContinue && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return AccessCodeState{}, workflow.NewContinueAsNewError(ctx, AccessCodeWorkflowName, AccessCodeInput{
				CodeID: in.CodeID, ExpiresAt: in.ExpiresAt, Ended: true,
				Outcome: wf.state.Outcome, Releases: wf.state.Releases, Backoff: backoff,
			})
		}
	}
}

// changeHoldReleaseContinueAsNew versions the hold-release loop's continue-as-new: runs
// recorded before it replay without it.
const changeHoldReleaseContinueAsNew = "hold-release-continue-as-new"
