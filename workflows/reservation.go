package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/activities"
)

// Reservation workflow names.
const (
	ReservationWorkflowName = "Reservation"
	// SignalReservationEnded tells the workflow the reservation ended before its expiry;
	// the argument is the outcome ("cancelled" or "consumed").
	SignalReservationEnded = "reservation-ended"
	// QueryReservationState answers the workflow's current ReservationState.
	QueryReservationState = "state"
)

// Reservation outcomes.
const (
	OutcomeActive    = "active"
	OutcomeExpired   = "expired"
	OutcomeCancelled = "cancelled"
	OutcomeConsumed  = "consumed"
)

// ReservationWorkflowID is the workflow ID of a reservation.
func ReservationWorkflowID(reservationID string) string { return "reservation/" + reservationID }

// ReservationInput starts a reservation workflow. ExpiresAt is absolute, so a retried or
// late start keeps the original deadline.
type ReservationInput struct {
	ReservationID string
	ExpiresAt     time.Time
}

// ReservationState is the workflow's answer to QueryReservationState and its result.
type ReservationState struct {
	Outcome string
	// ExpiryApplied is true when the timer's expiry was written (the reservation was still
	// active then); the locker was given back only if this reservation still held it.
	ExpiryApplied bool
}

// Reservation waits for the reservation's expiry, or for the signal that it ended first.
// On expiry it frees the locker through an activity, which does nothing if the
// reservation no longer holds it.
func Reservation(ctx workflow.Context, in ReservationInput) (ReservationState, error) {
	wf := &reservationImpl{state: ReservationState{Outcome: OutcomeActive}}
	if err := wf.setup(ctx); err != nil {
		return ReservationState{}, err
	}
	return wf.run(ctx, in)
}

type reservationImpl struct {
	state ReservationState
}

func (wf *reservationImpl) setup(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, QueryReservationState, func() (ReservationState, error) {
		return wf.state, nil
	})
}

func (wf *reservationImpl) run(ctx workflow.Context, in ReservationInput) (ReservationState, error) {
	outcome, expired := awaitEnd(ctx, in.ExpiresAt, SignalReservationEnded, "reservation expiry")
	if !expired {
		if outcome != OutcomeConsumed {
			outcome = OutcomeCancelled
		}
		wf.state.Outcome = outcome
		workflow.GetLogger(ctx).Info("reservation ended before expiry", "outcome", outcome)
		return wf.state, nil
	}
	var res activities.ExpireReservationResult
	err := workflow.ExecuteActivity(withExpiryActivity(ctx), a.ExpireReservation,
		activities.ExpireReservationInput{ReservationID: in.ReservationID}).Get(ctx, &res)
	if err != nil {
		return ReservationState{}, err
	}
	wf.state = ReservationState{Outcome: OutcomeExpired, ExpiryApplied: res.Expired}
	return wf.state, nil
}
