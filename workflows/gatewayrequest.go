package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/workflows/contract"
)

// versionFirstSendInLine marks runs that may go on from a first send the apiserver made
// itself (gatewayreq.Spec.FirstSend); runs recorded before it always send first.
const versionFirstSendInLine = "first-send-in-line"

// versionBodiesInPostgres marks runs whose sends store the gateway's answer body with the
// request instead of returning it (SendGatewayRequestInput.StoreBody): the outcome's store
// takes it from there and the workflow's result does not carry it. Runs recorded before it
// carry bodies in their sends' markers and in their result.
const versionBodiesInPostgres = "bodies-in-postgres"

// versionSendsAsActivities marks runs whose sends are activities of their own rather than
// local activities (decision 0012): a local activity runs inside a workflow task, and a
// query waits for the task in flight, so a poll of a request whose gateway is slow waited
// for the whole send. Their first send also settles the request itself when the answer
// decides it at once (SendGatewayRequestInput.Settle), and a request whose send's fate is
// unknown (cut off with the process that made it) goes out again when its gateway honours
// Idempotency-Key
// (SendGatewayRequestResult.KeysHonoured), whatever its class: the gateway answers a re-send
// with what the first send did, so a door opens once even when a cloud process died
// mid-send. Runs recorded before it send with local activities and never re-send a hardware
// call.
const versionSendsAsActivities = "sends-as-activities"

// maxKeyedResends bounds the re-sends of a request whose fate is unknown to a gateway that
// honours keys (a second crash during the first re-send is covered too).
const maxKeyedResends = 2

// GatewayRequest forwards one call of the gateway cloud API to its gateway and settles it in
// exactly one terminal state (DESIGN §6.2):
//
//   - completed: the gateway answered with its API's own response (2xx, or 4xx other than
//     its 401 GATEWAY_AUTH_FAILED), kept verbatim;
//   - rejected (502): it answered that it did not carry the request out: 5xx other than
//     REQUEST_OUTCOME_UNKNOWN (a read is re-sent once first; a create's 503
//     LOCKER_ASSIGNMENT_CONFLICT is retried with short backoff first), something that is not
//     its API's JSON, or 401 GATEWAY_AUTH_FAILED;
//   - dispatch_failed (503): nothing could be delivered within the dispatch budget, and no
//     earlier send of a write or hardware call may have arrived;
//   - gateway_unresponsive (504): the outcome is unknown ("outcome": "unknown"): delivered,
//     but no answer within the deadline; or the gateway answered REQUEST_OUTCOME_UNKNOWN; or
//     re-sends were not delivered after a send that may have arrived. Hardware calls are
//     re-sent once delivered only when their fate is unknown and the gateway honours
//     Idempotency-Key; a read, a create (same transactionId) or a locker update is re-sent
//     once.
//
// The last activity writes the outcome to Postgres; the workflow's result is that row.
func GatewayRequest(ctx workflow.Context, in gatewayreq.Spec) (gatewayreq.Result, error) {
	wf := &gatewayRequestImpl{}
	if err := wf.setup(ctx, in); err != nil {
		return gatewayreq.Result{}, err
	}
	return wf.run(ctx)
}

type gatewayRequestImpl struct {
	in     gatewayreq.Spec
	policy gatewayreq.Policy
	state  contract.GatewayRequestState
	sends  sendCounts
}

func (wf *gatewayRequestImpl) setup(ctx workflow.Context, in gatewayreq.Spec) error {
	if in.RequestID == "" || in.Method == "" || in.Path == "" {
		return temporal.NewNonRetryableApplicationError("request id, method and path are required", "InvalidInput", nil)
	}
	switch in.Class {
	case gatewayreq.ClassRead, gatewayreq.ClassWrite, gatewayreq.ClassHardware:
	default:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown class %q", in.Class), "InvalidInput", nil)
	}
	wf.in, wf.policy = in, in.Policy.WithDefaults()
	wf.state = contract.GatewayRequestState{Status: gatewayreq.StatePending, UpdatedAt: workflow.Now(ctx)}
	return workflow.SetQueryHandler(ctx, contract.QueryGatewayRequestState, func() (contract.GatewayRequestState, error) {
		return wf.state, nil
	})
}

func (wf *gatewayRequestImpl) run(ctx workflow.Context) (gatewayreq.Result, error) {
	paths := wf.sendPaths(ctx)
	for {
		wf.sends.send++
		res, err := paths.send(ctx, wf)
		if err == nil && res.Settled != nil {
			// The send stored the outcome itself (its answer decided the request).
			return wf.settled(ctx, *res.Settled, res.UsedCode)
		}
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeGatewayMisconfigured {
			return wf.finish(ctx, gatewayreq.DispatchFailed(appErr.Message()), false, false)
		}
		if err != nil {
			return gatewayreq.Result{}, err
		}
		wf.state.Attempts = max(wf.state.Attempts, res.Attempts)
		wf.state.UpdatedAt = workflow.Now(ctx)
		if wf.in.GatewayStopping(res) {
			// Nothing was carried out and the gateway is back in seconds (its supervisor
			// restarts it): the request goes out again within the dispatch budget.
			res.Outcome, res.Error = activities.SendNotDelivered, "the gateway was stopping"
		}

		var next sendStep
		switch res.Outcome {
		case activities.SendFinished:
			// Another run stored the outcome already; finishing returns it.
			next = settle(gatewayreq.Unresponsive(0, "the request was settled elsewhere"), false, false)
		case activities.SendNotDelivered:
			next, err = wf.notDelivered(ctx, res)
		case activities.SendNoAnswer, activities.SendUnknown:
			next = wf.noAnswer(ctx, res, paths.sendsAsActivities)
		case activities.SendAnswered:
			next, err = wf.answered(ctx, res)
		default:
			return gatewayreq.Result{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("unknown send outcome %q", res.Outcome), "InvalidOutcome", nil)
		}
		if err != nil {
			return gatewayreq.Result{}, err
		}
		if next.done {
			return wf.finish(ctx, next.outcome, next.answered, next.unreachable)
		}
	}
}

// sendCounts is what the sends of a run have come to so far.
type sendCounts struct {
	send             int
	dispatchFailures int
	serverResends    int  // reads re-sent after a 5xx
	conflictRetries  int  // creates retried after 503 LOCKER_ASSIGNMENT_CONFLICT
	noAnswerResends  int  // re-sends after a delivered send got no answer
	mayHaveArrived   bool // an earlier send may have reached the gateway
	answered         bool // the gateway answered a send
}

// sendStep is what a send's result leads to: another send, or settling with outcome.
type sendStep struct {
	done                  bool
	outcome               gatewayreq.Outcome
	answered, unreachable bool
}

func settle(o gatewayreq.Outcome, answered, unreachable bool) sendStep {
	return sendStep{done: true, outcome: o, answered: answered, unreachable: unreachable}
}

// sendAgain is a sendStep that makes another send.
var sendAgain = sendStep{}

// sendPaths are the ways a run's sends go out, decided once per run by its revision (or, for
// runs from before the markerless revision, by the markers it recorded).
type sendPaths struct {
	// firstSend is what the apiserver's own first send came to (decision 0009's runs).
	firstSend *activities.SendGatewayRequestResult
	// firstSendLocal: the first send is a local activity inside the first workflow task
	// (gatewayreq.RevisionFirstSendLocal, decision 0018).
	firstSendLocal bool
	// sendsAsActivities: sends are activities of their own (decision 0012); otherwise local
	// activities (the runs recorded before it).
	sendsAsActivities bool
	storeBody         bool
	timeout           time.Duration
	localCtx, actCtx  workflow.Context
}

// sendPaths decides the run's send paths. The first send is a local activity inside the
// first workflow task (gatewayreq.RevisionFirstSendLocal, decision 0018): with eager start on
// the apiserver's own gateway worker it runs in the process that took the request, and when
// its answer settles the request (it stores the outcome itself) the workflow completes in
// that same task — a bare workflow's cost. Every later send is an activity of its own
// (versionSendsAsActivities), so the workflow answers queries while one is in flight; a poll
// during the first send answers from the stored row instead (gatewayreq.FirstSendOut). Runs
// recorded before decision 0012 send every time with local activities, runs of revision 1
// every time with activities. A process that stops during a send loses it; the send's retry
// (or the first task's, after gatewayreq.TaskTimeout) finds it begun and answers SendUnknown
// instead of sending it twice.
func (wf *gatewayRequestImpl) sendPaths(ctx workflow.Context) sendPaths {
	timeout := wf.policy.Timeout(wf.in.Class)
	p := sendPaths{
		// The apiserver that stored the request may have made its first send itself and
		// handed what it came to over (Spec.FirstSend): the workflow goes on from there.
		firstSend:      wf.in.FirstSend,
		firstSendLocal: wf.in.Revision >= gatewayreq.RevisionFirstSendLocal,
		// A run started as RevisionMarkerless or later takes every change's current path and
		// records no marker (a change made after it goes behind workflow.GetVersion again);
		// the runs started before it decide each change by their recorded markers.
		sendsAsActivities: true, storeBody: true, timeout: timeout,
		localCtx: workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			// One send: the call's deadline plus room to record it.
			StartToCloseTimeout: timeout + 15*time.Second,
			RetryPolicy:         shortRetry(10*time.Second, "InvalidInput", activities.ErrTypeGatewayMisconfigured),
		}),
	}
	if wf.in.Revision < gatewayreq.RevisionMarkerless {
		if p.firstSend != nil && workflow.GetVersion(ctx, versionFirstSendInLine, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			p.firstSend = nil
		}
		p.storeBody = workflow.GetVersion(ctx, versionBodiesInPostgres, workflow.DefaultVersion, 1) >= 1
		p.sendsAsActivities = workflow.GetVersion(ctx, versionSendsAsActivities, workflow.DefaultVersion, 1) >= 1
	}
	p.actCtx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// The same budget as the local activity's: one send, with room to record it.
		StartToCloseTimeout: timeout + 15*time.Second,
		// The send heartbeats while it is out: a worker that dies mid-send is noticed in
		// seconds, and the retry finds the send begun (SendUnknown).
		HeartbeatTimeout: 10 * time.Second,
		RetryPolicy:      shortRetry(10*time.Second, "InvalidInput", activities.ErrTypeGatewayMisconfigured),
	})
	return p
}

// send makes the run's current send (wf.sends.send) on its path.
func (p sendPaths) send(ctx workflow.Context, wf *gatewayRequestImpl) (activities.SendGatewayRequestResult, error) {
	n := wf.sends.send
	in := activities.SendGatewayRequestInput{
		RequestID: wf.in.RequestID, Send: n, Method: wf.in.Method, Path: wf.in.Path, Body: wf.in.Body, Timeout: p.timeout,
		StoreBody: p.storeBody,
	}
	wf.state.NextAttemptAt = time.Time{}
	var res activities.SendGatewayRequestResult
	var err error
	switch {
	case n == 1 && p.firstSend != nil:
		res = *p.firstSend
	case n == 1 && p.firstSendLocal:
		// The first send may settle the request itself (it stores the outcome and wakes the
		// waiting handler); the workflow then ends in this same task.
		in.Settle = wf.settleSpec()
		wf.sendOut(ctx, n)
		err = workflow.ExecuteLocalActivity(p.localCtx, a.SendGatewayRequest, in).Get(ctx, &res)
	case p.sendsAsActivities:
		if n == 1 {
			in.Settle = wf.settleSpec()
		}
		wf.sendOut(ctx, n)
		err = workflow.ExecuteActivity(p.actCtx, a.SendGatewayRequest, in).Get(ctx, &res)
	default:
		err = workflow.ExecuteLocalActivity(p.localCtx, a.SendGatewayRequest, in).Get(ctx, &res)
	}
	return res, err
}

// notDelivered is what a send that never reached the gateway leads to: another after the
// dispatch backoff, until the dispatch budget is spent.
func (wf *gatewayRequestImpl) notDelivered(ctx workflow.Context, res activities.SendGatewayRequestResult) (sendStep, error) {
	c := &wf.sends
	c.dispatchFailures++
	wf.state.Status, wf.state.LastError = gatewayreq.StatePending, res.Error
	if c.dispatchFailures >= wf.policy.DispatchAttempts {
		if c.mayHaveArrived && wf.in.Class != gatewayreq.ClassRead {
			// An earlier send may have reached the gateway and carried the request out:
			// "not delivered" would tell the caller it did not happen.
			return settle(gatewayreq.Unresponsive(0, "an earlier send may have been carried out; the re-sends were not delivered: "+res.Error), false, false), nil
		}
		return settle(gatewayreq.DispatchFailed(res.Error), false, !c.mayHaveArrived && !c.answered), nil
	}
	backoff := wf.policy.DispatchBackoff << (c.dispatchFailures - 1)
	wf.state.NextAttemptAt = workflow.Now(ctx).Add(backoff)
	workflow.GetLogger(ctx).Info("gateway request not delivered; retrying", "attempt", c.dispatchFailures, "backoff", backoff, "err", res.Error)
	return sendAgain, workflow.Sleep(ctx, backoff)
}

// noAnswer is what a delivered send without an answer (or one of unknown fate) leads to: a
// re-send where it is safe, else gateway_unresponsive.
func (wf *gatewayRequestImpl) noAnswer(ctx workflow.Context, res activities.SendGatewayRequestResult, sendsAsActivities bool) sendStep {
	c := &wf.sends
	logger := workflow.GetLogger(ctx)
	wf.state.Status, wf.state.LastError = gatewayreq.StateDispatched, res.Error
	if res.Outcome == activities.SendUnknown {
		wf.state.LastError = "the send was interrupted; its answer is unknown"
	}
	c.mayHaveArrived = true
	if wf.in.ResendableAfterNoAnswer() && c.noAnswerResends == 0 {
		c.noAnswerResends++
		logger.Info("gateway request unanswered; re-sending once", "outcome", res.Outcome)
		return sendAgain
	}
	if sendsAsActivities && res.Outcome == activities.SendUnknown && res.KeysHonoured && c.noAnswerResends < maxKeyedResends {
		// The send was cut off with the process that made it (its retry found it begun):
		// the gateway carries a keyed request out once and answers a re-send with what
		// the first send did, so sending again cannot act twice. A send the gateway did
		// not answer in time is not re-sent: the gateway itself is in trouble, and the
		// caller should not wait another deadline for it.
		c.noAnswerResends++
		logger.Info("gateway request's fate unknown; re-sending with its key", "outcome", res.Outcome)
		return sendAgain
	}
	return settle(gatewayreq.Unresponsive(wf.policy.Timeout(wf.in.Class), wf.state.LastError), false, false)
}

// answered is what the gateway's answer leads to (gatewayreq.Spec.AfterAnswer): its outcome,
// a read's re-send after a 5xx, or a create's retry after an assignment conflict.
func (wf *gatewayRequestImpl) answered(ctx workflow.Context, res activities.SendGatewayRequestResult) (sendStep, error) {
	c := &wf.sends
	c.answered = true
	wf.state.Status = gatewayreq.StateDispatched
	o, next := wf.in.AfterAnswer(res, c.mayHaveArrived, c.serverResends, c.conflictRetries)
	switch next {
	case gatewayreq.AnswerResend:
		c.serverResends++
		wf.state.LastError = fmt.Sprintf("gateway answered %d", res.Status)
		workflow.GetLogger(ctx).Info("gateway answered a read with a server error; re-sending once", "status", res.Status)
		return sendAgain, nil
	case gatewayreq.AnswerRetryConflict:
		c.conflictRetries++
		wf.state.LastError = "LOCKER_ASSIGNMENT_CONFLICT"
		pause := wf.policy.ConflictBackoff * time.Duration(c.conflictRetries)
		wf.state.NextAttemptAt = workflow.Now(ctx).Add(pause)
		return sendAgain, workflow.Sleep(ctx, pause)
	}
	return settle(o, true, false), nil
}

// settleSpec is the request (without its body) a first send may settle itself
// (SendGatewayRequestInput.Settle).
func (wf *gatewayRequestImpl) settleSpec() *gatewayreq.Spec {
	settle := wf.in
	settle.Body, settle.FirstSend = nil, nil
	return &settle
}

// sendOut records that send number send is out: while it is, the request stands as its row
// does — dispatched, this send counted (a query answers that; a send not delivered sets it
// back to pending).
func (wf *gatewayRequestImpl) sendOut(ctx workflow.Context, send int) {
	wf.state.Status, wf.state.Attempts, wf.state.UpdatedAt = gatewayreq.StateDispatched, max(wf.state.Attempts, send), workflow.Now(ctx)
}

// finishInput is what FinishGatewayRequest stores for outcome o.
func (wf *gatewayRequestImpl) finishInput(o gatewayreq.Outcome, answered, unreachable bool) activities.FinishGatewayRequestInput {
	return activities.FinishGatewayRequestInput{
		RequestID: wf.in.RequestID, OrganizationID: wf.in.OrganizationID, Class: wf.in.Class, Outcome: o.WithAttempts(wf.state.Attempts),
		GatewayAnswered: answered, GatewayUnreachable: unreachable,
	}
}

// finish writes the outcome to Postgres and returns it as stored.
func (wf *gatewayRequestImpl) finish(ctx workflow.Context, o gatewayreq.Outcome, answered, unreachable bool) (gatewayreq.Result, error) {
	actx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         shortRetry(30*time.Second, "InvalidInput"),
	})
	var res activities.FinishGatewayRequestResult
	err := workflow.ExecuteLocalActivity(actx, a.FinishGatewayRequest, wf.finishInput(o, answered, unreachable)).Get(ctx, &res)
	if err != nil {
		return gatewayreq.Result{}, err
	}
	return wf.settled(ctx, res.Result, res.UsedCode)
}

// settled ends the run with the outcome as stored (by its finish, or by a first send that
// settled the request itself) and its follow-up.
func (wf *gatewayRequestImpl) settled(ctx workflow.Context, res gatewayreq.Result, usedCode string) (gatewayreq.Result, error) {
	wf.state = contract.GatewayRequestState{Status: res.Outcome.Status, Attempts: res.Attempts, UpdatedAt: res.UpdatedAt, LastError: wf.state.LastError}
	if usedCode != "" {
		// A single-use access code opened its locker: its workflow releases the hold. A
		// workflow that is already over has nothing left to release.
		_ = workflow.SignalExternalWorkflow(ctx, contract.AccessCodeWorkflowID(usedCode), "", contract.SignalCodeEnded, contract.CodeOutcomeUsed).Get(ctx, nil)
	}
	return res, nil
}
