package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

// AccessCodeStore is what the access-code activities need from Postgres.
type AccessCodeStore interface {
	AccessCode(ctx context.Context, orgID int64, id uuid.UUID) (store.AccessCode, error)
	ExpireAccessCode(ctx context.Context, id uuid.UUID) (bool, error)
	GatewayByID(ctx context.Context, id int64) (store.Gateway, error)
	GatewayRequestByID(ctx context.Context, id uuid.UUID) (store.GatewayRequest, error)
	CreateGatewayRequest(ctx context.Context, r store.NewGatewayRequest, idem *store.IdempotencyClaim) (store.GatewayRequest, bool, error)
	SettleCodeOpen(ctx context.Context, r store.GatewayRequest, codeID uuid.UUID, e store.CodeOpenEffect) error
	RecordGatewayTransaction(ctx context.Context, r store.GatewayRequest, t store.GatewayTransaction) error
}

// AwaitGatewayRequestInput names a gateway request to wait for.
type AwaitGatewayRequestInput struct {
	RequestID string
}

// AwaitGatewayRequest returns once the request has its outcome; before that it fails with
// a retryable NotSettled, so the workflow's retry policy does the waiting.
func (a *Activities) AwaitGatewayRequest(ctx context.Context, in AwaitGatewayRequestInput) (string, error) {
	id, err := uuid.Parse(in.RequestID)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError("bad request id", "InvalidInput", err)
	}
	r, err := a.AccessCodes.GatewayRequestByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", temporal.NewNonRetryableApplicationError("no such gateway request", "InvalidInput", err)
	}
	if err != nil {
		return "", fmt.Errorf("await gateway request: %w", err)
	}
	if !r.Terminal() {
		return "", temporal.NewApplicationError("gateway request not settled yet", "NotSettled")
	}
	return r.Status, nil
}

// ExpireAccessCodeInput names the code whose timer fired.
type ExpireAccessCodeInput struct {
	CodeID string
}

// ExpireAccessCodeResult tells whether the expiry changed anything, and else how the code
// had ended.
type ExpireAccessCodeResult struct {
	Expired bool
	Status  string
}

// ExpireAccessCode writes the code's expiry back.
func (a *Activities) ExpireAccessCode(ctx context.Context, in ExpireAccessCodeInput) (ExpireAccessCodeResult, error) {
	expired, err := applyExpiry(ctx, "access code", in.CodeID, a.AccessCodes.ExpireAccessCode)
	if err != nil {
		return ExpireAccessCodeResult{}, err
	}
	res := ExpireAccessCodeResult{Expired: expired, Status: store.CodeExpired}
	if !expired {
		c, err := a.AccessCodes.AccessCode(ctx, 0, uuid.MustParse(in.CodeID))
		if errors.Is(err, store.ErrNotFound) {
			// The code's row is gone (a database restored from before it was made): the
			// workflow ends here, before any release is sent for a code nobody knows.
			return ExpireAccessCodeResult{}, temporal.NewNonRetryableApplicationError("access code not found", "CodeMissing", err)
		}
		if err != nil {
			return ExpireAccessCodeResult{}, fmt.Errorf("read access code: %w", err)
		}
		res.Status = c.Status
	}
	return res, nil
}

// PrepareHoldReleaseInput names the code whose hold to release, and the attempt.
type PrepareHoldReleaseInput struct {
	CodeID  string
	Attempt int
}

// PrepareHoldRelease records the gateway request that releases a code's hold
// (DELETE /transactions/{code id}) and returns the input of its workflow, dispatched under
// the worker's gateway policy. The request id is derived from the code and the attempt, so a
// retried activity finds the same request.
func (a *Activities) PrepareHoldRelease(ctx context.Context, in PrepareHoldReleaseInput) (gatewayreq.Spec, error) {
	id, err := uuid.Parse(in.CodeID)
	if err != nil {
		return gatewayreq.Spec{}, temporal.NewNonRetryableApplicationError("bad code id", "InvalidInput", err)
	}
	c, err := a.AccessCodes.AccessCode(ctx, 0, id)
	if errors.Is(err, store.ErrNotFound) {
		return gatewayreq.Spec{}, temporal.NewNonRetryableApplicationError("access code not found", "CodeMissing", err)
	}
	if err != nil {
		return gatewayreq.Spec{}, fmt.Errorf("read access code: %w", err)
	}
	gw, err := a.AccessCodes.GatewayByID(ctx, c.GatewayID)
	if err != nil {
		return gatewayreq.Spec{}, fmt.Errorf("read gateway: %w", err)
	}
	reqID := uuid.NewSHA1(id, fmt.Appendf(nil, "release/%d", in.Attempt))
	path := "/transactions/" + c.ID.String()
	r, _, err := a.AccessCodes.CreateGatewayRequest(ctx, store.NewGatewayRequest{
		ID: reqID, OrganizationID: c.OrganizationID, LocationID: c.LocationID, GatewayID: gw.ID, GatewaySerial: gw.Serial,
		Kind: gatewayreq.KindAccessCodeRelease, Class: gatewayreq.ClassWrite, Method: "DELETE", Path: "/locker/access-code/" + c.ID.String(), GatewayPath: path,
		Subject: c.ID.String(),
	}, nil)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return gatewayreq.Spec{}, fmt.Errorf("record release request: %w", err)
	}
	if errors.Is(err, store.ErrConflict) {
		if r, err = a.AccessCodes.GatewayRequestByID(ctx, reqID); err != nil {
			return gatewayreq.Spec{}, fmt.Errorf("read release request: %w", err)
		}
	}
	return r.Spec(a.Gateways.Policy), nil
}
