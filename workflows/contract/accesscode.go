package contract

import (
	"time"
)

// Access-code workflow names.
const (
	AccessCodeWorkflowName = "AccessCode"
	// SignalCodeEnded tells the workflow the code ended before its expiry; the argument is
	// the reason (CodeOutcomeRemoved or CodeOutcomeUsed).
	SignalCodeEnded = "code-ended"
	// QueryAccessCodeState answers the workflow's current AccessCodeState.
	QueryAccessCodeState = "state"
)

// Access-code outcomes (AccessCodeState.Outcome). They are recorded in the workflows'
// histories (signals, results, continue-as-new inputs): never change a value.
const (
	CodeOutcomeActive  = "active"
	CodeOutcomeExpired = "expired"
	CodeOutcomeRemoved = "removed"
	CodeOutcomeUsed    = "used"
)

// AccessCodeWorkflowID is the workflow ID of an access code.
func AccessCodeWorkflowID(codeID string) string { return "access-code/" + codeID }

// AccessCodeInput starts an access code's workflow.
type AccessCodeInput struct {
	CodeID    string
	ExpiresAt time.Time
	// HoldRequestID is the gateway request that created the code's hold, when the
	// apiserver stopped waiting for it: the workflow waits for it to settle before
	// releasing, so a late hold is never left behind.
	HoldRequestID string
	// Ended: the code never became active (its hold did not settle in time); only the
	// release remains.
	Ended bool
	// Set when a run that was still releasing continued as new: the code's outcome, the
	// release attempts made and the back-off reached, so the next run goes on from there.
	Outcome  string        `json:",omitempty"`
	Releases int           `json:",omitempty"`
	Backoff  time.Duration `json:",omitempty"`
}

// AccessCodeState is the workflow's answer to QueryAccessCodeState and its result.
type AccessCodeState struct {
	Outcome  string // CodeOutcomeActive, CodeOutcomeExpired, CodeOutcomeRemoved or CodeOutcomeUsed
	Released bool   // the gateway confirmed the locker's hold is gone
	Releases int    // release attempts (gateway requests) made
}
