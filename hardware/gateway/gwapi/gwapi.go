// Package gwapi holds the gateway local API's schemas (DESIGN §7), named as the interface
// document names them. The gateway serves them (hardware/gateway aliases every one), its own
// OpenAPI document is generated from them, and the gateway cloud API's OpenAPI references
// them for the answers it passes through, so the three cannot drift apart. The package has no
// dependencies: the apiserver imports it without linking the gateway.
package gwapi

// Locker is one locker's state. Available = Operational ∧ ¬OutOfService ∧ no transaction.
type Locker struct {
	LockerID      int     `json:"lockerId"`
	Name          string  `json:"name" doc:"Label on the door"`
	BankID        int     `json:"bankId"`
	LockerTypeID  int     `json:"lockerTypeId"`
	IsLowLocker   bool    `json:"isLowLocker"`
	OutOfService  bool    `json:"outOfService"`
	Operational   bool    `json:"operational" doc:"The lock controller reports the locker working"`
	DoorOpen      bool    `json:"doorOpen"`
	Available     bool    `json:"available" doc:"operational, in service and holding no transaction"`
	TransactionID *string `json:"transactionId" doc:"The transaction holding the locker, if any"`
	ReasonCode    *string `json:"reasonCode" doc:"Why it is out of service (when it is)"`
	Reason        *string `json:"reason"`
}

// LockerTypeSummary is an entry of GET /locker-types.
type LockerTypeSummary struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// LockerType is GET /locker-types/{id}.
type LockerType struct {
	ID          int     `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	WidthMm     int     `json:"widthMm"`
	HeightMm    int     `json:"heightMm"`
	DepthMm     int     `json:"depthMm"`
	LockerCount int     `json:"lockerCount" doc:"Lockers of this type at the gateway"`
}

// LockController describes one lock controller.
type LockController struct {
	ID              string `json:"id"`
	Kind            string `json:"kind" doc:"Driver: sim (the simulator), kerong-cu16 or kerong-cu48 (Kerong boards)"`
	Address         string `json:"address"`
	Online          bool   `json:"online"`
	LockerCount     int    `json:"lockerCount"`
	FirmwareVersion string `json:"firmwareVersion"`
}

// LockerConfig is GET /lockers/config.
type LockerConfig struct {
	GatewayID string       `json:"gatewayId"`
	Banks     []BankConfig `json:"banks"`
}

// BankConfig is one bank of LockerConfig.
type BankConfig struct {
	ID         int            `json:"id"`
	BankTypeID int            `json:"bankTypeId"`
	Controller LockController `json:"controller"`
	Lockers    []BankLocker   `json:"lockers"`
}

// BankLocker is one locker's wiring in LockerConfig.
type BankLocker struct {
	LockerID     int    `json:"lockerId"`
	Name         string `json:"name"`
	Channel      int    `json:"channel" doc:"The controller's channel that drives the lock"`
	LockerTypeID int    `json:"lockerTypeId"`
}

// System is GET /system.
type System struct {
	GatewayID     string           `json:"gatewayId"`
	Version       string           `json:"version"`
	UptimeSeconds int64            `json:"uptimeSeconds"`
	Hostname      string           `json:"hostname"`
	Time          string           `json:"time" format:"date-time"`
	Controllers   []LockController `json:"controllers"`
}

// LogEntry is an entry of GET /system/logs.
type LogEntry struct {
	Timestamp string         `json:"timestamp" format:"date-time"`
	Level     string         `json:"level" doc:"DEBUG, INFO, WARN or ERROR"`
	Message   string         `json:"message"`
	Fields    map[string]any `json:"fields" doc:"The entry's structured attributes"`
}

// TransactionResponse is a transaction: which locker it holds since when.
type TransactionResponse struct {
	TransactionID string `json:"transactionId"`
	LockerID      int    `json:"lockerId"`
	CreatedAt     string `json:"createdAt" format:"date-time"`
}

// Error is the local API's error body.
type Error struct {
	Error     string         `json:"error" doc:"Machine-readable code, e.g. LOCKER_NOT_FOUND"`
	Message   string         `json:"message"`
	Timestamp string         `json:"timestamp" format:"date-time"`
	Details   map[string]any `json:"details"`
}

// TransactionConflict is the body of a 409 on POST /transactions: the Error fields plus, at
// the top level, the existing transaction (so it reads both as an Error and as a
// TransactionResponse).
type TransactionConflict struct {
	Error
	TransactionResponse
}

// OperationResponse is a generic outcome.
type OperationResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

// LockerOperationResponse is the outcome of an operation on one locker.
type LockerOperationResponse struct {
	Success  bool   `json:"success"`
	LockerID int    `json:"lockerId"`
	DoorOpen bool   `json:"doorOpen"`
	Message  string `json:"message"`
}

// OperationResult is one entry of MultiStatusOperationResponse; Status is the HTTP status
// the single operation would have answered, Error its error code.
type OperationResult struct {
	LockerID int    `json:"lockerId"`
	Status   int    `json:"status"`
	Success  bool   `json:"success"`
	Message  string `json:"message"`
	Error    string `json:"error,omitempty"`
}

// MultiStatusOperationResponse is a 207 body: one result per locker.
type MultiStatusOperationResponse struct {
	Results      []OperationResult `json:"results"`
	SuccessCount int               `json:"successCount"`
	FailureCount int               `json:"failureCount"`
}

// OpenAllLockersResponse is POST /lockers/open-all: a MultiStatusOperationResponse.
type OpenAllLockersResponse MultiStatusOperationResponse

// BankType is an entry of GET /bank-types.
type BankType struct {
	ID          int    `json:"id"`
	Name        string `json:"name"`
	LockerCount int    `json:"lockerCount"`
}

// BankTypeAssociation counts one locker type within a bank type.
type BankTypeAssociation struct {
	LockerTypeID int `json:"lockerTypeId"`
	Count        int `json:"count"`
}

// BankTypeWithAssociations is GET /bank-types/{id}.
type BankTypeWithAssociations struct {
	ID           int                   `json:"id"`
	Name         string                `json:"name"`
	LockerCount  int                   `json:"lockerCount"`
	Associations []BankTypeAssociation `json:"associations"`
}

// DeviceHeartbeatRequest is the body of POST /system/heartbeat.
type DeviceHeartbeatRequest struct {
	DeviceID  string `json:"deviceId" minLength:"1" maxLength:"128"`
	Kind      string `json:"kind" minLength:"1" maxLength:"64"`
	Status    string `json:"status" minLength:"1" maxLength:"64"`
	Timestamp string `json:"timestamp,omitempty" format:"date-time"`
}

// Health is GET /health.
type Health struct {
	Status        string             `json:"status" enum:"ok,degraded"`
	Controllers   []ControllerHealth `json:"controllers"`
	UptimeSeconds int64              `json:"uptimeSeconds"`
}

// ControllerHealth is one controller in Health.
type ControllerHealth struct {
	ID     string `json:"id"`
	Online bool   `json:"online"`
}

// CreateTransactionBody is the body of POST /transactions. The gateway also accepts
// transactionId as a number and the type ids as numeric strings. LockerID asks for one
// particular locker (the cloud holds the locker of an access code this way); it must also
// match the other criteria given.
type CreateTransactionBody struct {
	TransactionID    string `json:"transactionId,omitempty"`
	LockerID         *int   `json:"lockerId,omitempty"`
	LockerTypeID     *int   `json:"lockerTypeId,omitempty"`
	BankTypeID       *int   `json:"bankTypeId,omitempty"`
	RequireLowLocker *bool  `json:"requireLowLocker,omitempty"`
}

// PatchLockerBody is the body of PATCH /lockers/{lockerId}.
type PatchLockerBody struct {
	OutOfService bool    `json:"outOfService"`
	ReasonCode   *string `json:"reasonCode,omitempty"`
	Reason       *string `json:"reason,omitempty"`
}

// Alert kinds (GET /alerts): what the gateway's watch of its lock controllers saw.
const (
	// AlertDoorAjar: a door stayed open longer than the gateway's door-ajar setting.
	AlertDoorAjar = "door_ajar"
	// AlertForcedOpen: a door was seen opening with no open sent by the gateway for it
	// recently; the locker is taken out of service (reason code FORCED_OPEN).
	AlertForcedOpen = "forced_open"
	// AlertItemLeft: the door of a transaction released after an open under it reads shut
	// with the presence sensor on.
	AlertItemLeft = "item_left"
	// AlertControllerOffline: a lock controller failed several sensor reads in a row.
	AlertControllerOffline = "controller_offline"
	// AlertControllerOnline: a controller reported offline answers again.
	AlertControllerOnline = "controller_online"
)

// AlertKinds lists every alert kind.
var AlertKinds = []string{AlertDoorAjar, AlertForcedOpen, AlertItemLeft, AlertControllerOffline, AlertControllerOnline}

// ReasonForcedOpen is the reason code of a locker taken out of service by a forced_open alert.
const ReasonForcedOpen = "FORCED_OPEN"

// Alert is one condition the gateway's watch raised, in the order raised.
type Alert struct {
	Seq          int64   `json:"seq" doc:"Increasing within the alert log (stream), never reused in it; pass the last one seen as after="`
	Kind         string  `json:"kind" enum:"door_ajar,forced_open,item_left,controller_offline,controller_online"`
	GatewayID    string  `json:"gatewayId"`
	LockerID     *int    `json:"lockerId" doc:"The locker (null for controller alerts)"`
	LockerName   *string `json:"lockerName" doc:"The label on its door (null for controller alerts)"`
	BankID       int     `json:"bankId"`
	ControllerID string  `json:"controllerId"`
	At           string  `json:"at" format:"date-time" doc:"When the watch saw the condition"`
	Message      string  `json:"message"`
	// TransactionID is the released transaction of an item_left alert.
	TransactionID *string `json:"transactionId,omitempty" doc:"item_left: the released transaction"`
}

// AlertList is the answer of GET /alerts.
type AlertList struct {
	Alerts []Alert `json:"alerts" doc:"Alerts with seq > after, oldest first"`
	// Next is the after= of the next call: the last alert's seq, or after when there was none.
	Next int64 `json:"next" doc:"The after= of the next call"`
	// Stream names the gateway's alert log: it changes only when the gateway starts on a new
	// database, whose seqs start again at 1 (a cursor of the old log then means nothing).
	Stream string `json:"stream" doc:"The alert log's identity: a new one when the gateway's database is new and seqs start again at 1; a caller that sees it change starts again from after=0"`
}
