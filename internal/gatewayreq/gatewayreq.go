// Package gatewayreq is the vocabulary of gateway requests (DESIGN §6): the calls the cloud
// forwards to a location's gateway local API through a gateway-request/<id> workflow. It
// names their kinds, classes and states, the outcome a request settles in, the error codes
// of the terminal states and the spec a workflow runs from, once, for the apiserver, the
// workflows, the activities and the store. It imports nothing of the service's own, so any
// of them may use it.
package gatewayreq

import (
	"encoding/json"
	"time"
)

// Classes (DESIGN §6.1) decide waits, deadlines and what may be re-sent.
const (
	ClassRead     = "read"
	ClassWrite    = "write"
	ClassHardware = "hardware"
)

// States (DESIGN §6.2): two pending ones, then exactly one terminal.
const (
	StatePending             = "pending"
	StateDispatched          = "dispatched"
	StateCompleted           = "completed"
	StateRejected            = "rejected"
	StateDispatchFailed      = "dispatch_failed"
	StateGatewayUnresponsive = "gateway_unresponsive"
)

// Error codes of the terminal states other than completed (DESIGN §6.2).
const (
	CodeGatewayRejected     = "GATEWAY_REJECTED"
	CodeDispatchFailed      = "DISPATCH_FAILED"
	CodeGatewayUnresponsive = "GATEWAY_UNRESPONSIVE"
)

// CodeOutcomeUnknown is the gateway's own error code (hardware/gateway) for a request whose
// outcome it cannot tell: an unlock went out and neither its answer nor a read of the door
// confirms it, or a keyed request interrupted by a restart. Such a request ends
// gateway_unresponsive, never rejected (DESIGN §6.2).
const CodeOutcomeUnknown = "REQUEST_OUTCOME_UNKNOWN"

// OutcomeUnknown is the value of an error body's details.outcome when the request may or
// may not have been carried out (every gateway_unresponsive): the door may have moved.
const OutcomeUnknown = "unknown"

// HTTP statuses of the terminal states other than completed (DESIGN §6.2); a completed
// request answers with the gateway's own status. Plain numbers: the workflow that sets them
// does not import net/http.
const (
	HTTPStatusRejected            = 502
	HTTPStatusDispatchFailed      = 503
	HTTPStatusGatewayUnresponsive = 504
)

// Kinds of the gateway cloud API's proxied operations (DESIGN §6.1): PendingRequest.kind and
// the RequestKind search attribute show them.
const (
	KindHealth             = "health"
	KindSystem             = "system"
	KindSystemLogs         = "system-logs"
	KindListTransactions   = "list-transactions"
	KindGetTransaction     = "get-transaction"
	KindReleaseTransaction = "release-transaction"
	KindOpenTransaction    = "open-transaction"
	KindListLockers        = "list-lockers"
	KindLockerConfig       = "locker-config"
	KindGetLocker          = "get-locker"
	KindOpenLocker         = "open-locker"
	KindListLockerTypes    = "list-locker-types"
	KindGetLockerType      = "get-locker-type"
	KindListBankTypes      = "list-bank-types"
	KindGetBankType        = "get-bank-type"
	// KindCreateTransaction may be re-sent after a lost answer: it always carries a
	// transactionId, and the gateway answers a repeat with 409 and that same transaction.
	// A completed create is recorded as a transaction row.
	KindCreateTransaction = "create-transaction"
	// KindUpdateLocker may be re-sent after a lost answer: it sets an absolute state.
	KindUpdateLocker = "update-locker"
)

// Kinds of the app engine's requests (DESIGN §5): an access code holds its locker through a
// gateway transaction whose id is the code's. Their subject is the code's id, except a
// close's, which is the gateway's locker id.
const (
	KindAccessCodeHold    = "access-code-hold"
	KindAccessCodeRelease = "access-code-release"
	KindAccessCodeOpen    = "access-code-open"
	KindAccessCodeClose   = "access-code-close"
)

// Terminal reports whether status is one of the terminal states (DESIGN §6.2).
func Terminal(status string) bool {
	switch status {
	case StateCompleted, StateRejected, StateDispatchFailed, StateGatewayUnresponsive:
		return true
	}
	return false
}

// Outcome is a request's terminal outcome: for completed, the gateway's answer verbatim;
// otherwise the state's own HTTP status and error.
type Outcome struct {
	Status     string
	HTTPStatus int
	Headers    map[string]string
	Body       []byte
	// BodyInStore says the body is not carried here: it is the gateway's answer stored with
	// the request (a workflow's send stores it; the outcome's store takes it from there), so
	// that workflow histories do not carry bodies of up to 1 MiB. Whoever needs it reads the
	// stored request.
	BodyInStore  bool `json:",omitempty"`
	ErrorCode    string
	ErrorMessage string
	Details      map[string]any
}

// Result is a request's terminal outcome as stored, and the gateway-request workflow's
// result.
type Result struct {
	Outcome     Outcome
	Attempts    int
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time
}

// Spec is everything a gateway-request workflow runs from (its input): it is rebuilt from
// the stored request, so any apiserver or worker can (re)start the workflow identically.
type Spec struct {
	RequestID      string
	OrganizationID int64
	LocationID     int64
	GatewayID      int64
	GatewaySerial  string
	Kind           string
	// Class is read, write or hardware (Class*).
	Class  string
	Method string
	// Path is the gateway local-API path with its query.
	Path   string
	Body   []byte
	Policy Policy
	// FirstSend is what the request's first send came to when the apiserver that stored it
	// made that send itself and handed the rest to the workflow (decision 0009, superseded by
	// 0012): only runs started before 0012 carry it; the workflow goes on from it instead of
	// sending again. Nil for every run started now: the workflow makes every send.
	FirstSend *SendResult `json:",omitempty"`
	// Revision is the workflow code a run was started for. RevisionMarkerless (what every
	// request is started with now) takes every change's current path without recording a
	// version marker for it; zero, the runs started before it, decide each change by the
	// marker they recorded (workflows.GatewayRequest).
	Revision int `json:",omitempty"`
}

// RevisionMarkerless is the Spec.Revision of runs that record no version markers: each
// marker the Temporal SDK records comes with an upsert of the TemporalChangeVersion search
// attribute, one more visibility write per change and run.
const RevisionMarkerless = 1

// RevisionFirstSendLocal is the Spec.Revision of runs whose first send is a local activity
// inside the workflow's first task (decision 0018): a request its first send settles costs
// Temporal what a bare workflow costs. Re-sends, retries and every later send stay
// activities of their own. It records no version markers either.
const RevisionFirstSendLocal = 2

// RevisionCurrent is the revision every request's workflow is started with now.
const RevisionCurrent = RevisionFirstSendLocal

// TaskTimeout is a gateway request's workflow task timeout: a process that dies during the
// workflow's first task — with the first send out, a local activity of that task — is
// noticed after it, and the task runs again elsewhere, where the send is found begun and the
// unknown-fate rules apply (decision 0018). A first send that runs longer keeps the task
// alive by the SDK's workflow-task heartbeat (at 80 % of it).
const TaskTimeout = 5 * time.Second

// FirstSendOut reports whether a request stored as status, attempts and lastSend (its
// latest send begun) is still in its first send: its workflow's first task has not
// completed, so a query would wait for that task (DESIGN §6.2: a poll then answers from the
// stored row). A request pending with no send begun is there too (its first task is about
// to send); one pending after a send that never reached its gateway is not (its workflow
// waits on a timer).
func FirstSendOut(status string, attempts, lastSend int) bool {
	switch status {
	case StatePending:
		return attempts == 0
	case StateDispatched:
		return attempts <= 1 && lastSend <= 1
	}
	return false
}

// Outcomes of one send (SendResult.Outcome).
const (
	// SendAnswered: the gateway answered with an HTTP response.
	SendAnswered = "answered"
	// SendNotDelivered: the request never reached the gateway (refused, DNS, TLS, disabled).
	SendNotDelivered = "not_delivered"
	// SendNoAnswer: the request was delivered but no answer came within the deadline.
	SendNoAnswer = "no_answer"
	// SendUnknown: this send was begun before by an attempt whose fate is unknown (the
	// worker stopped); it may have been delivered.
	SendUnknown = "unknown"
	// SendFinished: the request already has its outcome (nothing was sent).
	SendFinished = "finished"
)

// SendResult is what one send came to. Gateway outcomes are results, never errors: the
// workflow decides what they mean.
type SendResult struct {
	Outcome  string
	Attempts int
	Status   int
	// Headers keeps Content-Type and X-Response-Truncated.
	Headers map[string]string
	Body    []byte
	// BodyInStore says the answer's body was stored with the request
	// (store.StoreGatewayAnswer) and is not carried here, except a 409's, which the
	// workflow reads (a re-sent create's TRANSACTION_EXISTS names its transaction).
	BodyInStore bool `json:",omitempty"`
	// APIJSON is true when the body is empty or JSON (the local API's own answer), false for
	// anything else (e.g. an HTML page from a proxy) or an answer too large to keep.
	APIJSON bool
	// ErrorCode and ErrorMessage are the local API's Error fields when the body has them.
	ErrorCode    string
	ErrorMessage string
	// Error describes a transport failure.
	Error string
	// KeysHonoured says the gateway honours Idempotency-Key (its answer said so, or, for a
	// send with no answer or of unknown fate, the cloud's record of it): a re-send of a
	// request whose fate is unknown then acts at most once.
	KeysHonoured bool `json:",omitempty"`
	// Settled is the request's outcome as stored when the send settled the request itself:
	// a first send asked to (SendGatewayRequestInput.Settle) whose answer decides the request
	// at once under the workflow's own rules. UsedCode is then the access code the open used
	// up (its workflow is to release the hold). Nil otherwise: the workflow settles it.
	Settled  *Result `json:",omitempty"`
	UsedCode string  `json:",omitempty"`
}

// Policy is how a request is dispatched; whoever starts the workflow fills it from its
// settings and it is recorded with the run, so a change of settings never alters a run in
// flight. Zero fields take DefaultPolicy's.
type Policy struct {
	// CallTimeout is the deadline for an answer to a read or write once delivered (10 s).
	CallTimeout time.Duration
	// HardwareTimeout is the deadline for a hardware call: it covers the gateway's own open
	// policy of 3 attempts of 20 s, 1 s apart (65 s).
	HardwareTimeout time.Duration
	// DispatchAttempts is the dispatch budget: how many times delivery is tried (3).
	DispatchAttempts int
	// DispatchBackoff is the pause after the first failed delivery, doubled after each (500 ms).
	DispatchBackoff time.Duration
	// ConflictRetries is how often a create answered 503 LOCKER_ASSIGNMENT_CONFLICT is
	// retried (3), ConflictBackoff the pause before each (200 ms).
	ConflictRetries int
	ConflictBackoff time.Duration
}

// DefaultPolicy is DESIGN §6.2's policy.
func DefaultPolicy() Policy {
	return Policy{
		CallTimeout: 10 * time.Second, HardwareTimeout: 65 * time.Second,
		DispatchAttempts: 3, DispatchBackoff: 500 * time.Millisecond,
		ConflictRetries: 3, ConflictBackoff: 200 * time.Millisecond,
	}
}

// WithDefaults fills the zero fields from DefaultPolicy.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.CallTimeout <= 0 {
		p.CallTimeout = d.CallTimeout
	}
	if p.HardwareTimeout <= 0 {
		p.HardwareTimeout = d.HardwareTimeout
	}
	if p.DispatchAttempts <= 0 {
		p.DispatchAttempts = d.DispatchAttempts
	}
	if p.DispatchBackoff <= 0 {
		p.DispatchBackoff = d.DispatchBackoff
	}
	if p.ConflictRetries < 0 {
		p.ConflictRetries = 0
	} else if p.ConflictRetries == 0 {
		p.ConflictRetries = d.ConflictRetries
	}
	if p.ConflictBackoff <= 0 {
		p.ConflictBackoff = d.ConflictBackoff
	}
	return p
}

// Timeout is the deadline of one call of the class.
func (p Policy) Timeout(class string) time.Duration {
	if class == ClassHardware {
		return p.HardwareTimeout
	}
	return p.CallTimeout
}

// SearchKind is the RequestKind search attribute of a gateway request's workflow:
// "gateway:<serial>:<kind>", so an operator finds all requests of a gateway with
// RequestKind STARTS_WITH "gateway:GW-0001:".
func SearchKind(serial, kind string) string { return "gateway:" + serial + ":" + kind }

// Door is what the gateway says of a door in a completed open's LockerOperationResponse or
// a close's Locker (hardware/gateway's bodies), as far as the service reads it.
type Door struct {
	Success  *bool  `json:"success"`
	DoorOpen bool   `json:"doorOpen"`
	Message  string `json:"message"`
}

// ReadDoor reads the door in an outcome's body; a body that says nothing of it reads as the
// zero Door.
func ReadDoor(o Outcome) Door {
	var d Door
	_ = json.Unmarshal(o.Body, &d)
	return d
}

// Opened reports whether an open's outcome opened the door: completed with a 2xx whose body
// does not say success false.
func Opened(o Outcome) bool {
	if o.Status != StateCompleted || o.HTTPStatus/100 != 2 {
		return false
	}
	d := ReadDoor(o)
	return d.Success == nil || *d.Success
}
