package contract

import (
	"time"
)

// Gateway-request workflow names.
const (
	GatewayRequestWorkflowName = "GatewayRequest"
	// QueryGatewayRequestState answers the request's current GatewayRequestState.
	QueryGatewayRequestState = "state"
)

// GatewayRequestWorkflowID is the workflow ID of a gateway request.
func GatewayRequestWorkflowID(requestID string) string { return "gateway-request/" + requestID }

// GatewayRequestState is the workflow's answer to QueryGatewayRequestState.
type GatewayRequestState struct {
	Status    string
	Attempts  int
	UpdatedAt time.Time
	// LastError says why the last send did not settle the request, if it did not.
	LastError string
	// NextAttemptAt is when the next send goes out while the workflow waits to re-send
	// (zero otherwise).
	NextAttemptAt time.Time
}
