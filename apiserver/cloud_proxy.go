package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/gatewayexec"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/idemhash"
	"github.com/lockernet/lockernet/internal/store"
)

// The gateway cloud API's proxied operations and polls (DESIGN §6.2, §6.3): the handler
// stores the request (and its Idempotency-Key) in one transaction, then the gateway-request
// executor (internal/gatewayexec) starts its workflow and waits up to the request's wait;
// the answer is the gateway's response verbatim, or 202 with the request to poll
// (cloud_render.go).

// proxy runs one proxied operation: check and count the key, store the request (claiming
// its Idempotency-Key), send it or start its workflow, wait, answer. A server with all its waiting slots taken answers
// 503 before it looks at anything else (an unknown location included): nothing is stored.
func (s *Server) proxy(ctx context.Context, call proxyCall) (*huma.StreamResponse, error) {
	e := edgeOf(ctx)
	began := time.Now()
	prefs := parsePrefer(e.prefer, s.cloud.defaultWait(call.class), s.cloud.settings.MaxWait)
	if prefs.wait > 0 {
		release, ok := s.requests.HoldWaiter()
		if !ok {
			return nil, s.cloudFailure(ctx, "wait", errGatewaysBusy)
		}
		defer release()
	}

	id := uuid.New()
	body := call.body
	if call.kind == gatewayreq.KindCreateTransaction {
		body = withTransactionID(body, id.String())
	}
	var idem *store.IdempotencyClaim
	if call.idemKey != "" && isMutating(call.method) {
		idem = &store.IdempotencyClaim{Key: call.idemKey, Hash: idemhash.Sum(call.method, e.uri, e.rawBody),
			TTL: s.cloud.settings.IdempotencyTTL}
	}
	// The location's gateway is found in the same round trip that stores the request, and
	// the key is checked and counted in it too (cloud_key_with_store.go).
	req := store.NewGatewayRequest{
		ID: id, LocationID: call.locationID, // the organization is the key's
		Kind: call.kind, Class: call.class, Method: call.method, Path: e.uri, GatewayPath: call.gatewayPath, Body: body,
		Waits: prefs.wait > 0,
	}
	row, _, created, refused, err := s.submitWithKey(ctx, pendingKeyOf(ctx), req, idem)
	if refused != nil {
		markTiming(ctx, "store", began)
		return nil, s.cloudFailure(ctx, "authenticate", refused)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, s.cloudFailure(ctx, "find gateway", &locationNotFoundError{locationID: call.locationID})
	case errors.Is(err, store.ErrIdempotencyKeyReused):
		return nil, s.cloudFailure(ctx, "create gateway request", &idempotencyKeyReusedError{key: call.idemKey})
	case err != nil:
		return nil, s.cloudFailure(ctx, "create gateway request", err)
	}
	markTiming(ctx, "store", began)
	replay := !created
	if row.Terminal() {
		return s.answerStored(row, replay, nil), nil
	}
	// A new request (or its replay): start its workflow, or meet the one started. With no
	// wait the 202 is built from the stored row: nothing is asked of the workflow.
	row, _ = s.requests.Await(ctx, row, prefs.wait, false)
	return s.answerRequest(gatewayexec.LiveRequest{GatewayRequest: row}, prefs, replay, http.StatusAccepted), nil
}

// pollGatewayRequest answers GET /requests/{id}.
func (s *Server) pollGatewayRequest(ctx context.Context, rawID string) (*huma.StreamResponse, error) {
	id, ok := parseRequestID(rawID)
	if !ok {
		return nil, s.cloudFailure(ctx, "get gateway request", errRequestNotFound)
	}
	row, err := s.requests.State(ctx, cloudKey(ctx).OrganizationID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, s.cloudFailure(ctx, "get gateway request", errRequestNotFound)
	}
	if err != nil {
		return nil, s.cloudFailure(ctx, "get gateway request", err)
	}
	prefs := parsePrefer(edgeOf(ctx).prefer, 0, s.cloud.settings.MaxWait)
	if row.Terminal() {
		return s.answerStored(row, false, nil), nil
	}
	if prefs.wait > 0 {
		release, ok := s.requests.HoldWaiter()
		if !ok {
			return nil, s.cloudFailure(ctx, "wait", errGatewaysBusy)
		}
		defer release()
	}
	// A poll only waits on the run; it starts it again only if it is gone. Still pending
	// after its wait, it answers what the workflow's query says (bounded), else the row.
	row, _ = s.requests.Await(ctx, row, prefs.wait, true)
	return s.answerRequest(s.requests.Live(ctx, row), prefs, false, http.StatusOK), nil
}

// parseRequestID reads a request id from the path; anything else is a request that does
// not exist.
func parseRequestID(raw string) (uuid.UUID, bool) {
	id, err := uuid.Parse(raw)
	return id, err == nil
}

// createTransactionBody is the body forwarded for a create: the caller's fields, with the
// request id as transactionId when none was given (set later, see proxy).
func createTransactionBody(ctx context.Context) ([]byte, error) {
	e := edgeOf(ctx)
	var in CreateTransactionBody
	if raw := bytes.TrimSpace(e.rawBody); len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, errBodyInvalid
		}
	}
	return json.Marshal(in)
}

// withTransactionID sets transactionId in a create body that has none.
func withTransactionID(body []byte, id string) []byte {
	var in CreateTransactionBody
	if json.Unmarshal(body, &in) != nil || in.TransactionID != nil {
		return body
	}
	ref := TransactionRef(id)
	in.TransactionID = &ref
	out, err := json.Marshal(in)
	if err != nil {
		return body
	}
	return out
}

func isMutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead
}
