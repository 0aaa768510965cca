package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
)

// Locker-token workflow names.
const (
	LockerTokenWorkflowName = "LockerToken"
	// SignalTokenEnded tells the workflow the token was used or revoked before its expiry;
	// the argument is the outcome ("used" or "revoked").
	SignalTokenEnded = "token-ended"
	// QueryTokenState answers the workflow's current LockerTokenState.
	QueryTokenState = "state"
)

// Token outcomes.
const (
	TokenOutcomeActive  = "active"
	TokenOutcomeUsed    = "used"
	TokenOutcomeRevoked = "revoked"
	TokenOutcomeExpired = "expired"
)

// LockerTokenWorkflowID is the workflow ID of a locker token.
func LockerTokenWorkflowID(tokenID string) string { return "locker-token/" + tokenID }

// LockerTokenInput starts a locker-token workflow; ExpiresAt is absolute.
type LockerTokenInput struct {
	TokenID   string
	Type      string
	ExpiresAt time.Time
}

// LockerTokenState is the workflow's answer to QueryTokenState and its result.
type LockerTokenState struct {
	Outcome string
}

// LockerToken keeps a locker token's durable expiry: when the token runs out unused, an
// activity marks it expired and, if it was the last drop-off token of a rental, gives the
// locker back (the seed: possession ends when the unused token expires).
func LockerToken(ctx workflow.Context, in LockerTokenInput) (LockerTokenState, error) {
	wf := &lockerTokenImpl{state: LockerTokenState{Outcome: TokenOutcomeActive}}
	if err := wf.setup(ctx); err != nil {
		return LockerTokenState{}, err
	}
	return wf.run(ctx, in)
}

type lockerTokenImpl struct {
	state LockerTokenState
}

func (wf *lockerTokenImpl) setup(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, QueryTokenState, func() (LockerTokenState, error) {
		return wf.state, nil
	})
}

func (wf *lockerTokenImpl) run(ctx workflow.Context, in LockerTokenInput) (LockerTokenState, error) {
	outcome, expired := awaitEnd(ctx, in.ExpiresAt, SignalTokenEnded, in.Type+" token expiry")
	if !expired {
		if outcome != TokenOutcomeUsed {
			outcome = TokenOutcomeRevoked
		}
		wf.state.Outcome = outcome
		return wf.state, nil
	}
	var res activities.ExpireTokenResult
	err := workflow.ExecuteActivity(withExpiryActivity(ctx), a.ExpireToken, activities.ExpireTokenInput{TokenID: in.TokenID}).Get(ctx, &res)
	if err != nil {
		return LockerTokenState{}, err
	}
	wf.state.Outcome = TokenOutcomeExpired
	if !res.Expired {
		// It was used or revoked while the timer was firing; Postgres knows which.
		wf.state.Outcome = TokenOutcomeUsed
	}
	return wf.state, nil
}
