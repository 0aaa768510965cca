package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows/contract"
)

// LockerToken keeps a locker token's durable expiry: when the token runs out unused, an
// activity marks it expired and, if it was the last drop-off token of a rental, gives the
// locker back (the seed: possession ends when the unused token expires).
func LockerToken(ctx workflow.Context, in contract.LockerTokenInput) (contract.LockerTokenState, error) {
	wf := &lockerTokenImpl{state: contract.LockerTokenState{Outcome: contract.TokenOutcomeActive}}
	if err := wf.setup(ctx); err != nil {
		return contract.LockerTokenState{}, err
	}
	return wf.run(ctx, in)
}

type lockerTokenImpl struct {
	state contract.LockerTokenState
}

func (wf *lockerTokenImpl) setup(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, contract.QueryTokenState, func() (contract.LockerTokenState, error) {
		return wf.state, nil
	})
}

func (wf *lockerTokenImpl) run(ctx workflow.Context, in contract.LockerTokenInput) (contract.LockerTokenState, error) {
	outcome, expired := awaitEnd(ctx, in.ExpiresAt, contract.SignalTokenEnded, in.Type+" token expiry")
	if !expired {
		if outcome != contract.TokenOutcomeUsed {
			outcome = contract.TokenOutcomeRevoked
		}
		wf.state.Outcome = outcome
		return wf.state, nil
	}
	var res activities.ExpireTokenResult
	err := workflow.ExecuteActivity(withExpiryActivity(ctx), a.ExpireToken, activities.ExpireTokenInput{TokenID: in.TokenID}).Get(ctx, &res)
	if err != nil {
		return contract.LockerTokenState{}, err
	}
	wf.state.Outcome = contract.TokenOutcomeExpired
	if !res.Expired {
		// It was used or revoked while the timer was firing; Postgres knows which.
		wf.state.Outcome = contract.TokenOutcomeUsed
	}
	return wf.state, nil
}
