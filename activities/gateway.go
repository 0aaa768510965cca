package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/internal/gatewayclient"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/store"
)

// Outcomes of one send (SendGatewayRequestResult.Outcome), declared in gatewayreq.
const (
	SendAnswered     = gatewayreq.SendAnswered
	SendNotDelivered = gatewayreq.SendNotDelivered
	SendNoAnswer     = gatewayreq.SendNoAnswer
	SendUnknown      = gatewayreq.SendUnknown
	SendFinished     = gatewayreq.SendFinished
)

// ErrTypeGatewayMisconfigured marks a gateway the cloud cannot call at all (its secret does
// not open); retrying cannot help, so the request fails to dispatch.
const ErrTypeGatewayMisconfigured = "GatewayMisconfigured"

// ErrTypeRequestNotStored marks an outcome for a request Postgres does not have at all.
const ErrTypeRequestNotStored = "RequestNotStored"

// GatewayRequestStore is what the gateway-request activities need from Postgres.
type GatewayRequestStore interface {
	BeginGatewaySend(ctx context.Context, id uuid.UUID, send int) (store.GatewaySend, error)
	AbandonGatewaySend(ctx context.Context, id uuid.UUID, send int) error
	StoreGatewayAnswer(ctx context.Context, id uuid.UUID, send int, body []byte) error
	FinishGatewayRequest(ctx context.Context, id uuid.UUID, orgID int64, o gatewayreq.Outcome, seen int, syncMirror bool) (store.GatewayRequest, error)
	// RecordGatewayKeys records whether a gateway honours Idempotency-Key, as its latest
	// answer said.
	RecordGatewayKeys(ctx context.Context, gatewayID int64, honoured bool) error
}

// SecretOpener opens secrets sealed under the master key.
type SecretOpener interface {
	Open(purpose string, sealed []byte) ([]byte, error)
}

// GatewayDeps are the dependencies of the gateway activities.
type GatewayDeps struct {
	Store   GatewayRequestStore
	Keyring SecretOpener
	// HTTP calls the gateways' local APIs (gatewayclient.Default when nil).
	HTTP *http.Client
	// Metrics counts terminal states (nothing when nil).
	Metrics *GatewayMetrics
	// Policy dispatches the gateway requests the worker starts itself (an access code's hold
	// release); zero fields take the defaults.
	Policy gatewayreq.Policy
	// Stored, when set, is given each request whose outcome FinishGatewayRequest stored (and
	// followed up): an apiserver running this worker hands it to its handlers waiting for
	// that request, in-process (nothing when nil).
	Stored func(store.GatewayRequest)
}

// SendGatewayRequestInput is one send of a gateway request to its gateway's local API.
type SendGatewayRequestInput struct {
	RequestID string
	// Send numbers the workflow's sends (1, 2, ...); with RequestID it is the command id
	// that keeps a retried activity from sending twice.
	Send   int
	Method string
	// Path is the local-API path with its query.
	Path string
	Body []byte
	// Timeout is how long to wait for the answer once the request is delivered.
	Timeout time.Duration
	// StoreBody stores the answer's body with the request instead of returning it
	// (SendGatewayRequestResult.BodyInStore): the workflow's history then never carries it.
	StoreBody bool `json:",omitempty"`
	// Settle, on a run's first send, is the request (without its body) the send may settle
	// itself: when the gateway's answer decides the request at once (Spec.SettleFirstSend),
	// the outcome is stored here, the waiting handlers are woken, and the result carries it
	// (Settled) — the caller's answer does not wait for this activity's completion to go
	// through Temporal and a second workflow task. Nil: the workflow settles the request.
	Settle *gatewayreq.Spec `json:",omitempty"`
}

// SendGatewayRequestResult is what one send came to (gatewayreq.SendResult: the workflow's
// input carries it when the apiserver made the first send itself).
type SendGatewayRequestResult = gatewayreq.SendResult

// SendGatewayRequest sends the request once. It first records the send in Postgres, so a
// second run of the same send (the worker stopped and another one re-ran the workflow task)
// knows the request may have been delivered and answers SendUnknown instead of sending it
// again; then it calls the gateway and classifies what happened: not delivered (nothing
// reached the gateway: the send is released so it may go out again), delivered without an
// answer, or answered. The workflow runs it as an activity of its own (a local activity in
// runs recorded before decision 0012), so a query is never held up behind a send.
func (a *Activities) SendGatewayRequest(ctx context.Context, in SendGatewayRequestInput) (SendGatewayRequestResult, error) {
	d := a.Gateways
	id, err := uuid.Parse(in.RequestID)
	if err != nil {
		return SendGatewayRequestResult{}, temporal.NewNonRetryableApplicationError("bad request id", "InvalidInput", err)
	}
	begun, err := d.Store.BeginGatewaySend(ctx, id, in.Send)
	if errors.Is(err, store.ErrNotFound) {
		return SendGatewayRequestResult{Outcome: SendFinished}, nil
	}
	if err != nil {
		return SendGatewayRequestResult{}, fmt.Errorf("begin gateway send: %w", err)
	}
	logger := activity.GetLogger(ctx)
	if !begun.Began {
		honoured := begun.Gateway.HonoursKeys
		if !honoured {
			// Not recorded yet (no answer of this gateway seen since it was registered, e.g.
			// right after a start): ask the gateway before the workflow decides whether the
			// send may go out again.
			honoured = d.askKeys(ctx, logger, begun.Gateway)
		}
		logger.Warn("gateway send begun before with unknown fate; not sending it again",
			"requestId", in.RequestID, "send", in.Send, "gateway", begun.Gateway.Serial, "keysHonoured", honoured)
		return SendGatewayRequestResult{Outcome: SendUnknown, Attempts: begun.Attempts, KeysHonoured: honoured}, nil
	}
	res, err := d.sendBegun(ctx, logger, id, begun, in)
	if err != nil || res.Outcome != SendAnswered {
		return res, err
	}
	if res.KeysHonoured != begun.Gateway.HonoursKeys {
		// Every answer says whether the gateway honours keys: record a change at once, so a
		// send whose fate becomes unknown later is decided on what the gateway says now.
		d.recordKeys(ctx, logger, begun.Gateway, res.KeysHonoured)
	}
	if settled, ok := a.settle(ctx, logger, in, res); ok || !in.StoreBody {
		return settled, nil
	}
	// Not settled here (the answer does not decide the request, or its outcome could not be
	// stored now): the body goes to Postgres, not into the workflow's history. A 409's stays: the
	// workflow compares a re-sent create's TRANSACTION_EXISTS with its own transaction.
	if err := d.Store.StoreGatewayAnswer(ctx, id, in.Send, res.Body); err != nil {
		// Postgres is away, or the row moved on (settled, or another send began: two runs
		// of one task sending at once): the answer is known here only, and an error would
		// make the retry find the send begun and answer SendUnknown. Carry the body
		// instead; the outcome's store keeps whichever outcome settled the request first.
		logger.Warn("store a gateway answer's body; the workflow carries it", "requestId", in.RequestID, "err", err)
		return res, nil
	}
	res.BodyInStore = true
	if res.Status != http.StatusConflict {
		res.Body = nil
	}
	return res, nil
}

// settle stores the outcome of a first send whose answer decides its request at once
// (SendGatewayRequestInput.Settle), and returns res carrying it. With StoreBody the answer's
// body is stored with the outcome in the same commit (not first on its own: one flushed
// commit fewer on the way to the caller's answer) and, as when it is stored alone, the
// result does not carry it (a 409's stays, for the workflow's comparison). ok is false when
// the answer does not decide the request, or its outcome cannot be stored now (Postgres
// away): res goes back as it was and the workflow stores the outcome with its own retries.
func (a *Activities) settle(ctx context.Context, logger log.Logger, in SendGatewayRequestInput,
	res SendGatewayRequestResult) (SendGatewayRequestResult, bool) {
	if in.Settle == nil {
		return res, false
	}
	o, ok := in.Settle.SettleFirstSend(res)
	if !ok {
		return res, false
	}
	out, err := a.Finish(ctx, logger, FinishGatewayRequestInput{RequestID: in.Settle.RequestID,
		OrganizationID: in.Settle.OrganizationID, Class: in.Settle.Class, Outcome: o, GatewayAnswered: true})
	if err != nil {
		logger.Warn("store a first send's outcome; the workflow stores it", "requestId", in.RequestID, "err", err)
		return res, false
	}
	settled := out.Result
	if in.StoreBody {
		res.BodyInStore = true
		if res.Status != http.StatusConflict {
			res.Body = nil
		}
		settled.Outcome.Body, settled.Outcome.BodyInStore = nil, true
	}
	res.Settled, res.UsedCode = &settled, out.UsedCode
	return res, true
}

// sendBegun sends a send recorded as begun and classifies what happened.
func (d GatewayDeps) sendBegun(ctx context.Context, logger log.Logger, id uuid.UUID, begun store.GatewaySend,
	in SendGatewayRequestInput) (SendGatewayRequestResult, error) {
	gw := begun.Gateway
	notDelivered := func(cause string) (SendGatewayRequestResult, error) {
		// The activity context may be cancelled (worker stopping): release the send anyway.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := d.Store.AbandonGatewaySend(rctx, id, in.Send); err != nil {
			return SendGatewayRequestResult{}, fmt.Errorf("release gateway send: %w", err)
		}
		if ctx.Err() != nil {
			// Stopped before anything went out: let Temporal run this send again.
			return SendGatewayRequestResult{}, fmt.Errorf("send to gateway %s: %w", gw.Serial, ctx.Err())
		}
		return SendGatewayRequestResult{Outcome: SendNotDelivered, Attempts: begun.Attempts, Error: cause}, nil
	}
	if gw.Disabled {
		return notDelivered("the gateway is disabled")
	}
	secret, err := d.Keyring.Open(keyring.GatewaySecretPurpose(gw.Serial), gw.SecretSealed)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = d.Store.AbandonGatewaySend(rctx, id, in.Send)
		return SendGatewayRequestResult{}, temporal.NewNonRetryableApplicationError(
			"the gateway's secret cannot be opened with the master key", ErrTypeGatewayMisconfigured, err)
	}

	stopBeats := sendHeartbeats(ctx)
	res, delivered, err := gatewayclient.Send(ctx, d.HTTP, gw.BaseURL, string(secret), gatewayclient.Request{
		ID: in.RequestID, Method: in.Method, Path: in.Path, Body: in.Body, Timeout: in.Timeout})
	stopBeats()
	switch {
	case err != nil && !delivered:
		logger.Info("gateway request not delivered", "requestId", in.RequestID, "gateway", gw.Serial, "err", err)
		return notDelivered(gatewayclient.Cause(err, false))
	case err != nil:
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The worker is stopping mid-call: the retry finds the send begun and reports
			// SendUnknown, which the workflow treats like a missing answer.
			return SendGatewayRequestResult{}, fmt.Errorf("send to gateway %s: %w", gw.Serial, ctx.Err())
		}
		logger.Warn("gateway request delivered without an answer", "requestId", in.RequestID, "gateway", gw.Serial, "err", err)
		return SendGatewayRequestResult{Outcome: SendNoAnswer, Attempts: begun.Attempts, Error: gatewayclient.Cause(err, true),
			KeysHonoured: gw.HonoursKeys}, nil
	}
	res.Attempts = begun.Attempts
	return res, nil
}

// askKeysTimeout bounds askKeys' exchange with the gateway.
const askKeysTimeout = 5 * time.Second

// askKeys asks gateway gw whether it honours Idempotency-Key (its /health answer's
// X-Idempotency-Keys header) and records what it says. A gateway that cannot be asked, or
// does not say so, does not honour keys.
func (d GatewayDeps) askKeys(ctx context.Context, logger log.Logger, gw store.Gateway) bool {
	if gw.Disabled {
		return false
	}
	secret, err := d.Keyring.Open(keyring.GatewaySecretPurpose(gw.Serial), gw.SecretSealed)
	if err != nil {
		return false
	}
	res, _, err := gatewayclient.Send(ctx, d.HTTP, gw.BaseURL, string(secret), gatewayclient.Request{
		Method: http.MethodGet, Path: "/health", Timeout: askKeysTimeout})
	if err != nil {
		logger.Warn("ask a gateway whether it honours idempotency keys", "gateway", gw.Serial, "err", err)
		return false
	}
	if res.KeysHonoured {
		d.recordKeys(ctx, logger, gw, true)
	}
	return res.KeysHonoured
}

// recordKeys records on gw's row whether it honours Idempotency-Key; a failure is logged
// (the next answer or sync records it again).
func (d GatewayDeps) recordKeys(ctx context.Context, logger log.Logger, gw store.Gateway, honoured bool) {
	if err := d.Store.RecordGatewayKeys(ctx, gw.ID, honoured); err != nil {
		logger.Warn("record whether a gateway honours idempotency keys", "gateway", gw.Serial, "err", err)
	}
}

// sendHeartbeats records heartbeats while a send is out, so a worker that dies mid-send is
// noticed after the activity's heartbeat timeout (seconds) instead of its start-to-close
// timeout (a door open's 80 s), and the send's retry finds it begun. A local activity (runs
// recorded before decision 0012) has no heartbeat.
func sendHeartbeats(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).IsLocalActivity {
		return func() {}
	}
	return heartbeatEvery(ctx, 2*time.Second)
}

// FinishGatewayRequestInput stores a request's terminal outcome.
type FinishGatewayRequestInput struct {
	RequestID string
	// OrganizationID is the request's organization (0 in histories recorded before it was
	// passed: any organization), so that storing an outcome nobody subscribes to needs no
	// transaction of its own.
	OrganizationID int64 `json:",omitempty"`
	Class          string
	Outcome        gatewayreq.Outcome
	// GatewayAnswered is true when the outcome came from an answer of the gateway (it is
	// online); GatewayUnreachable when nothing could be delivered.
	GatewayAnswered    bool
	GatewayUnreachable bool
}

// FinishGatewayRequestResult is the outcome as stored: when the request already had one (a
// retried activity, a second run), the stored one wins.
type FinishGatewayRequestResult struct {
	gatewayreq.Result
	// UsedCode is the access code a successful single-use open used up: its workflow is to
	// release the locker's hold.
	UsedCode string `json:",omitempty"`
}

// FinishGatewayRequest writes the terminal outcome to Postgres (the workflow's last
// activity), records what it showed about the gateway's health, and asks for a refresh of
// the gateway's locker mirror after a completed write (DESIGN §2: "after every proxied write").
func (a *Activities) FinishGatewayRequest(ctx context.Context, in FinishGatewayRequestInput) (FinishGatewayRequestResult, error) {
	return a.Finish(ctx, activity.GetLogger(ctx), in)
}

// Finish is FinishGatewayRequest's work, also done by a first send that settles its request
// itself (settle): the outcome stored, followed up, handed to the waiting handlers, counted.
func (a *Activities) Finish(ctx context.Context, logger log.Logger, in FinishGatewayRequestInput) (FinishGatewayRequestResult, error) {
	d := a.Gateways
	id, err := uuid.Parse(in.RequestID)
	if err != nil {
		return FinishGatewayRequestResult{}, temporal.NewNonRetryableApplicationError("bad request id", "InvalidInput", err)
	}
	seen := store.GatewaySeenUnknown
	switch {
	case in.GatewayAnswered:
		seen = store.GatewaySeenAnswered
	case in.GatewayUnreachable:
		seen = store.GatewaySeenUnreachable
	}
	// A write may change what the mirror holds (a locker's type, its service state); a door
	// open (a hardware call) never does, and a busy bank opens doors all day.
	syncMirror := in.Class == gatewayreq.ClassWrite && in.Outcome.Status == gatewayreq.StateCompleted
	r, err := d.Store.FinishGatewayRequest(ctx, id, in.OrganizationID, in.Outcome, seen, syncMirror)
	if errors.Is(err, store.ErrNotFound) {
		// No such request at all (a waiting read's row lost in a Postgres crash before its
		// flush, decision 0011): there is nothing to settle, now or later.
		return FinishGatewayRequestResult{}, temporal.NewNonRetryableApplicationError(
			"the request is not stored", ErrTypeRequestNotStored, err)
	}
	if err != nil {
		return FinishGatewayRequestResult{}, fmt.Errorf("finish gateway request: %w", err)
	}
	if r.CompletedAt == nil {
		return FinishGatewayRequestResult{}, fmt.Errorf("finish gateway request %s: no outcome stored", in.RequestID)
	}
	// What the outcome means beyond the request (gateway_followups.go).
	var usedCode string
	if a.AccessCodes != nil {
		if usedCode, err = a.followUp(ctx, r); err != nil {
			return FinishGatewayRequestResult{}, fmt.Errorf("follow up gateway request: %w", err)
		}
	}
	if d.Stored != nil {
		d.Stored(r)
	}
	d.Metrics.terminal(r.Class, r.Status)
	logger.Info("gateway request finished", "requestId", in.RequestID, "status", r.Status,
		"httpStatus", r.Outcome.HTTPStatus, "attempts", r.Attempts)
	res := r.Result()
	if in.Outcome.BodyInStore {
		// Its body stays in Postgres: the workflow's result does not carry it either.
		res.Outcome.Body, res.Outcome.BodyInStore = nil, true
	}
	return FinishGatewayRequestResult{Result: res, UsedCode: usedCode}, nil
}
