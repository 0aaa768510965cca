package contract

import (
	"time"
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
