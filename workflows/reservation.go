package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Reservation waits for the reservation's expiry, or for the signal that it ended first.
// On expiry it frees the locker through an activity, which does nothing if the
// reservation no longer holds it.
func Reservation(ctx workflow.Context, in contract.ReservationInput) (contract.ReservationState, error) {
	wf := &reservationImpl{state: contract.ReservationState{Outcome: contract.OutcomeActive}}
	if err := wf.setup(ctx); err != nil {
		return contract.ReservationState{}, err
	}
	return wf.run(ctx, in)
}

type reservationImpl struct {
	state contract.ReservationState
}

func (wf *reservationImpl) setup(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, contract.QueryReservationState, func() (contract.ReservationState, error) {
		return wf.state, nil
	})
}

func (wf *reservationImpl) run(ctx workflow.Context, in contract.ReservationInput) (contract.ReservationState, error) {
	outcome, expired := awaitEnd(ctx, in.ExpiresAt, contract.SignalReservationEnded, "reservation expiry")
	if !expired {
		if outcome != contract.OutcomeConsumed {
			outcome = contract.OutcomeCancelled
		}
		wf.state.Outcome = outcome
		workflow.GetLogger(ctx).Info("reservation ended before expiry", "outcome", outcome)
		return wf.state, nil
	}
	var res activities.ExpireReservationResult
	err := workflow.ExecuteActivity(withExpiryActivity(ctx), a.ExpireReservation,
		activities.ExpireReservationInput{ReservationID: in.ReservationID}).Get(ctx, &res)
	if err != nil {
		return contract.ReservationState{}, err
	}
	wf.state = contract.ReservationState{Outcome: contract.OutcomeExpired, ExpiryApplied: res.Expired}
	return wf.state, nil
}
