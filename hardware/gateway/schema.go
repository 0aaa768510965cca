package gateway

import "github.com/lockernet/lockernet/hardware/gateway/gwapi"

// The local API's schemas (§7 of the design) live in gwapi, which the gateway's OpenAPI
// (openapi.go) and the gateway cloud API's OpenAPI are generated from; the names here are
// the same types.
type (
	Locker                       = gwapi.Locker
	LockerTypeSummary            = gwapi.LockerTypeSummary
	LockerType                   = gwapi.LockerType
	LockController               = gwapi.LockController
	LockerConfig                 = gwapi.LockerConfig
	BankConfig                   = gwapi.BankConfig
	BankLocker                   = gwapi.BankLocker
	System                       = gwapi.System
	LogEntry                     = gwapi.LogEntry
	Alert                        = gwapi.Alert
	AlertList                    = gwapi.AlertList
	TransactionResponse          = gwapi.TransactionResponse
	TransactionConflict          = gwapi.TransactionConflict
	OperationResponse            = gwapi.OperationResponse
	LockerOperationResponse      = gwapi.LockerOperationResponse
	OperationResult              = gwapi.OperationResult
	MultiStatusOperationResponse = gwapi.MultiStatusOperationResponse
	OpenAllLockersResponse       = gwapi.OpenAllLockersResponse
	BankType                     = gwapi.BankType
	BankTypeAssociation          = gwapi.BankTypeAssociation
	BankTypeWithAssociations     = gwapi.BankTypeWithAssociations
	DeviceHeartbeatRequest       = gwapi.DeviceHeartbeatRequest
	Health                       = gwapi.Health
	ControllerHealth             = gwapi.ControllerHealth
	CreateTransactionBody        = gwapi.CreateTransactionBody
	PatchLockerBody              = gwapi.PatchLockerBody
	// ErrorBody is the local API's Error schema.
	ErrorBody = gwapi.Error
)
