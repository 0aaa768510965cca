package contract

import (
	"time"
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
