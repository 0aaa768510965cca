package contract

import (
	"time"
)

// Pickup-window workflow names (docs/pickup-windows.md).
const (
	PickupWindowWorkflowName = "PickupWindow"
	// SignalPickupWindowChanged wakes the workflow when its window changed outside it (an
	// extension, a policy applied to running windows, a pickup or a return request); the
	// argument is a PickupWindowChange. The database is the truth: the workflow acts on what
	// its activity reads, so a lost or late signal only delays the wake-up to the old time.
	SignalPickupWindowChanged = "pickup-window-changed"
	// QueryPickupWindowState answers the workflow's current PickupWindowState.
	QueryPickupWindowState = "state"
)

// PickupWindowWorkflowID is the workflow ID of a pickup window.
func PickupWindowWorkflowID(windowID string) string { return "pickup-window/" + windowID }

// PickupWindowInput starts a pickup-window workflow: NextAt is absolute (the first reminder
// or the end), so a late or repeated start keeps the window's times. Steps counts the timer
// steps of earlier runs (continue-as-new).
type PickupWindowInput struct {
	WindowID string
	NextAt   time.Time
	Steps    int
}

// PickupWindowChange is SignalPickupWindowChanged's argument: the window's next time as the
// change left it, zero when nothing more is scheduled (picked up, overdue, returned).
type PickupWindowChange struct {
	NextAt time.Time
}

// PickupWindowState is the workflow's answer to QueryPickupWindowState and its result.
type PickupWindowState struct {
	// Status is the window's status as the last step read it ("open" until then).
	Status string
	// NextAt is the next timer, zero once nothing more is scheduled.
	NextAt time.Time
	// Steps is how many times a timer fired and the window's step ran.
	Steps int
}
