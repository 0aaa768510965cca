package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/workflows/contract"
)

// AccessCode keeps an access code's lifecycle: an active code holds its locker through a
// gateway transaction (its id is the code's); when the code expires (durable timer), is
// removed or is used up, the workflow releases the hold through a gateway request, trying
// again until the gateway confirms.
func AccessCode(ctx workflow.Context, in contract.AccessCodeInput) (contract.AccessCodeState, error) {
	wf := &accessCodeImpl{state: contract.AccessCodeState{Outcome: contract.CodeOutcomeActive}}
	if err := workflow.SetQueryHandler(ctx, contract.QueryAccessCodeState, func() (contract.AccessCodeState, error) { return wf.state, nil }); err != nil {
		return contract.AccessCodeState{}, err
	}
	return wf.run(ctx, in)
}

type accessCodeImpl struct {
	state contract.AccessCodeState
}

func (wf *accessCodeImpl) run(ctx workflow.Context, in contract.AccessCodeInput) (contract.AccessCodeState, error) {
	waitCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{"InvalidInput"}},
	})
	if in.HoldRequestID != "" {
		// Retried (NotSettled) until the hold's gateway request has its outcome.
		if err := workflow.ExecuteActivity(waitCtx, a.AwaitGatewayRequest, activities.AwaitGatewayRequestInput{RequestID: in.HoldRequestID}).Get(ctx, nil); err != nil {
			return contract.AccessCodeState{}, err
		}
	}
	if in.Ended {
		wf.state.Outcome = contract.CodeOutcomeRemoved
		if in.Outcome != "" {
			wf.state.Outcome, wf.state.Releases = in.Outcome, in.Releases
		}
	} else {
		// Active (the query says so) until the expiry or a signal ends it.
		reason, expired := awaitEnd(ctx, in.ExpiresAt, contract.SignalCodeEnded, "access code expiry")
		switch {
		case expired:
			var res activities.ExpireAccessCodeResult
			if err := workflow.ExecuteActivity(withExpiryActivity(ctx), a.ExpireAccessCode, activities.ExpireAccessCodeInput{CodeID: in.CodeID}).Get(ctx, &res); err != nil {
				return contract.AccessCodeState{}, err
			}
			wf.state.Outcome = contract.CodeOutcomeExpired
			if !res.Expired {
				wf.state.Outcome = res.Status // it ended otherwise just before the timer
			}
		case reason == contract.CodeOutcomeUsed:
			wf.state.Outcome = contract.CodeOutcomeUsed
		default:
			wf.state.Outcome = contract.CodeOutcomeRemoved
		}
	}
	return wf.release(ctx, waitCtx, in)
}

// release sends DELETE /transactions/{code id} as a gateway request, and again (backing off
// up to 10 minutes) until the gateway answers that the hold is gone (204, or 404: gone). A
// gateway offline for weeks would grow the history without end: when Temporal suggests it,
// the workflow continues as new, carrying the outcome, the attempts and the back-off.
func (wf *accessCodeImpl) release(ctx, actCtx workflow.Context, in contract.AccessCodeInput) (contract.AccessCodeState, error) {
	backoff := 15 * time.Second
	if in.Backoff > 0 {
		backoff = in.Backoff
	}
	canContinue := workflow.GetVersion(ctx, changeHoldReleaseContinueAsNew, workflow.DefaultVersion, 1) >= 1
	for {
		wf.state.Releases++
		var req gatewayreq.Spec
		if err := workflow.ExecuteActivity(actCtx, a.PrepareHoldRelease, activities.PrepareHoldReleaseInput{CodeID: in.CodeID, Attempt: wf.state.Releases}).Get(ctx, &req); err != nil {
			return contract.AccessCodeState{}, err
		}
		child := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:          contract.GatewayRequestWorkflowID(req.RequestID),
			WorkflowTaskTimeout: gatewayreq.TaskTimeout,
			TypedSearchAttributes: contract.SearchAttrs{OrganizationID: req.OrganizationID, LocationID: req.LocationID,
				RequestKind: gatewayreq.SearchKind(req.GatewaySerial, req.Kind)}.Typed(),
		})
		var res gatewayreq.Result
		if err := workflow.ExecuteChildWorkflow(child, contract.GatewayRequestWorkflowName, req).Get(ctx, &res); err != nil {
			return contract.AccessCodeState{}, err
		}
		if res.Outcome.Status == gatewayreq.StateCompleted && (res.Outcome.HTTPStatus/100 == 2 || res.Outcome.HTTPStatus == gatewayStatusNotFound) {
			wf.state.Released = true
			return wf.state, nil
		}
		workflow.GetLogger(ctx).Warn("access code hold not released; trying again", "status", res.Outcome.Status,
			"httpStatus", res.Outcome.HTTPStatus, "backoff", backoff)
		if err := workflow.Sleep(ctx, backoff); err != nil {
			return contract.AccessCodeState{}, err
		}
		backoff = min(backoff*2, 10*time.Minute)
		if canContinue && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return contract.AccessCodeState{}, workflow.NewContinueAsNewError(ctx, contract.AccessCodeWorkflowName, contract.AccessCodeInput{
				CodeID: in.CodeID, ExpiresAt: in.ExpiresAt, Ended: true,
				Outcome: wf.state.Outcome, Releases: wf.state.Releases, Backoff: backoff,
			})
		}
	}
}

// gatewayStatusNotFound is the local API's 404: a hold already gone. A plain number:
// workflows does not import net/http.
const gatewayStatusNotFound = 404

// changeHoldReleaseContinueAsNew versions the hold-release loop's continue-as-new: runs
// recorded before it replay without it.
const changeHoldReleaseContinueAsNew = "hold-release-continue-as-new"
