package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows"
)

// Gateway requests (DESIGN §6.1, §6.2): every proxied operation is a gateway-request/<id>
// workflow. The handler stores the request (and its Idempotency-Key) in one transaction,
// starts the workflow with a fixed id, and waits for its result up to the request's wait;
// then it answers the gateway's response verbatim, or 202 with the request to poll.

// ProxyHeaders are the request headers every proxied operation reads.
type ProxyHeaders struct {
	Prefer string `header:"Prefer" doc:"RFC 7240: wait=N (seconds, clamped to [0, 30]) or respond-async" example:"wait=10"`
}

// IdempotencyHeader is the header of the mutating operations.
type IdempotencyHeader struct {
	IdempotencyKey string `header:"Idempotency-Key" minLength:"1" maxLength:"255" pattern:"^[\\x20-\\x7E]+$" doc:"Makes a retry safe: the same key with the same method, path and body answers the first request's outcome with Idempotent-Replayed: true (kept 30 days); with anything else, 422 IDEMPOTENCY_KEY_REUSED" example:"6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"`
}

// LocationPath addresses a gateway location.
type LocationPath struct {
	LocationID int64 `path:"locationId" minimum:"1" doc:"A location with a gateway (GET /locations)"`
}

// TransactionPath addresses a gateway transaction.
type TransactionPath struct {
	TransactionID string `path:"transactionId" pattern:"^[A-Za-z0-9._~:@-]{1,128}$" doc:"The transaction's id at the gateway"`
}

// GatewayLockerPath addresses a gateway locker.
type GatewayLockerPath struct {
	LockerID int64 `path:"lockerId" minimum:"1"`
}

// TypePath addresses a locker type or bank type.
type TypePath struct {
	ID int64 `path:"id" minimum:"1"`
}

// TransactionRef is a transaction id sent as a JSON string or a non-negative integer.
type TransactionRef string

var transactionRefSchema = &huma.Schema{OneOf: []*huma.Schema{
	{Type: "string", Pattern: "^[A-Za-z0-9._~:@-]{1,128}$"},
	{Type: "integer", Format: "int64", Minimum: ptrFloat(0)},
}, Description: "Your id for the transaction (a string, or a number); absent: the cloud uses the request id, so a re-send never assigns a second locker"}

// UnmarshalJSON accepts "abc-1" and 17.
func (t *TransactionRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = TransactionRef(s)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 {
		return errors.New("expected a string or a non-negative integer")
	}
	*t = TransactionRef(strconv.FormatInt(n, 10))
	return nil
}

// Schema documents both accepted forms.
func (TransactionRef) Schema(huma.Registry) *huma.Schema { return transactionRefSchema }

// CreateTransactionBody is the body of a transaction create (the gateway's own body).
type CreateTransactionBody struct {
	TransactionID    *TransactionRef `json:"transactionId,omitempty"`
	LockerID         *FlexID         `json:"lockerId,omitempty" doc:"Assign this particular locker (it must also match the other criteria)"`
	LockerTypeID     *FlexID         `json:"lockerTypeId,omitempty" doc:"Assign a locker of this type"`
	BankTypeID       *FlexID         `json:"bankTypeId,omitempty" doc:"Assign a locker in a bank of this type"`
	RequireLowLocker *bool           `json:"requireLowLocker,omitempty" doc:"Assign a low (accessible) locker"`
}

// PatchLockerBody takes a locker out of service or returns it.
type PatchLockerBody struct {
	OutOfService bool    `json:"outOfService" required:"true"`
	ReasonCode   *string `json:"reasonCode,omitempty" maxLength:"64"`
	Reason       *string `json:"reason,omitempty" maxLength:"500"`
}

// PendingRequest is a gateway request that has not reached its terminal state (the body of
// 202s and of polls).
type PendingRequest struct {
	ID          string     `json:"id" format:"uuid"`
	Status      string     `json:"status" enum:"pending,dispatched,completed,rejected,dispatch_failed,gateway_unresponsive"`
	Kind        string     `json:"kind" example:"open-locker"`
	Method      string     `json:"method" example:"POST"`
	Path        string     `json:"path" example:"/api/customer/v1/locations/4/lockers/3/open"`
	LocationID  int64      `json:"locationId"`
	GatewayID   string     `json:"gatewayId" example:"GW-0001"`
	CreatedAt   Timestamp  `json:"createdAt"`
	UpdatedAt   Timestamp  `json:"updatedAt"`
	CompletedAt *Timestamp `json:"completedAt"`
	Attempts    int        `json:"attempts" doc:"Sends to the gateway so far"`
}

// proxyCall is one proxied operation as the handler resolved it.
type proxyCall struct {
	kind, class string
	locationID  int64
	method      string
	gatewayPath string
	body        []byte // forwarded to the gateway (nil: none)
	idemKey     string
}

func (s *Server) registerGatewayRequests(api huma.API, tags []string) {
	type readIn struct {
		ProxyHeaders
		LocationPath
	}
	read := func(id, kind, path, summary string, gatewayPath func(*readIn) string) {
		registerProxy(s, api, tags, id, kind, gatewayreq.ClassRead, http.MethodGet, path, summary,
			func(in *readIn) (proxyCall, error) {
				return proxyCall{locationID: in.LocationID, gatewayPath: gatewayPath(in)}, nil
			})
	}
	read("customer-gateway-health", gatewayreq.KindHealth, "/locations/{locationId}/health", "Gateway health check",
		func(*readIn) string { return "/health" })
	read("customer-gateway-system", gatewayreq.KindSystem, "/locations/{locationId}/system", "Gateway system info",
		func(*readIn) string { return "/system" })
	read("customer-list-transactions", gatewayreq.KindListTransactions, "/locations/{locationId}/transactions", "List transactions",
		func(*readIn) string { return "/transactions" })
	read("customer-list-lockers", gatewayreq.KindListLockers, "/locations/{locationId}/lockers", "List lockers",
		func(*readIn) string { return "/lockers" })
	read("customer-locker-config", gatewayreq.KindLockerConfig, "/locations/{locationId}/lockers/config", "Locker configuration",
		func(*readIn) string { return "/lockers/config" })
	read("customer-list-locker-types", gatewayreq.KindListLockerTypes, "/locations/{locationId}/locker-types", "List locker types",
		func(*readIn) string { return "/locker-types" })
	read("customer-list-bank-types", gatewayreq.KindListBankTypes, "/locations/{locationId}/bank-types", "List bank types",
		func(*readIn) string { return "/bank-types" })

	registerProxy(s, api, tags, "customer-gateway-logs", gatewayreq.KindSystemLogs, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/system/logs", "Gateway logs",
		func(in *struct {
			ProxyHeaders
			LocationPath
			Limit int `query:"limit" minimum:"1" maximum:"1000" doc:"Newest entries to return (default 100); X-Response-Truncated: true when more matched"`
		}) (proxyCall, error) {
			p := "/system/logs"
			if in.Limit > 0 {
				p += "?limit=" + strconv.Itoa(in.Limit)
			}
			return proxyCall{locationID: in.LocationID, gatewayPath: p}, nil
		})
	registerProxy(s, api, tags, "customer-get-transaction", gatewayreq.KindGetTransaction, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/transactions/{transactionId}", "Fetch a transaction",
		func(in *struct {
			ProxyHeaders
			LocationPath
			TransactionPath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/transactions/" + url.PathEscape(in.TransactionID)}, nil
		})
	registerProxy(s, api, tags, "customer-get-locker", gatewayreq.KindGetLocker, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/lockers/{lockerId}", "Fetch a locker",
		func(in *struct {
			ProxyHeaders
			LocationPath
			GatewayLockerPath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/lockers/" + strconv.FormatInt(in.LockerID, 10)}, nil
		})
	registerProxy(s, api, tags, "customer-get-locker-type", gatewayreq.KindGetLockerType, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/locker-types/{id}", "Fetch a locker type",
		func(in *struct {
			ProxyHeaders
			LocationPath
			TypePath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/locker-types/" + strconv.FormatInt(in.ID, 10)}, nil
		})
	registerProxy(s, api, tags, "customer-get-bank-type", gatewayreq.KindGetBankType, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/bank-types/{id}", "Fetch a bank type",
		func(in *struct {
			ProxyHeaders
			LocationPath
			TypePath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/bank-types/" + strconv.FormatInt(in.ID, 10)}, nil
		})

	registerProxy(s, api, tags, "customer-create-transaction", gatewayreq.KindCreateTransaction, gatewayreq.ClassWrite, http.MethodPost,
		"/locations/{locationId}/transactions", "Create a transaction",
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			Body *CreateTransactionBody
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/transactions", idemKey: in.IdempotencyKey}, nil
		})
	registerProxy(s, api, tags, "customer-release-transaction", gatewayreq.KindReleaseTransaction, gatewayreq.ClassWrite, http.MethodDelete,
		"/locations/{locationId}/transactions/{transactionId}", "Release a transaction",
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			TransactionPath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/transactions/" + url.PathEscape(in.TransactionID), idemKey: in.IdempotencyKey}, nil
		})
	registerProxy(s, api, tags, "customer-open-transaction", gatewayreq.KindOpenTransaction, gatewayreq.ClassHardware, http.MethodPost,
		"/locations/{locationId}/transactions/{transactionId}/open", "Open the locker assigned to a transaction",
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			TransactionPath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/transactions/" + url.PathEscape(in.TransactionID) + "/open", idemKey: in.IdempotencyKey}, nil
		})
	registerProxy(s, api, tags, "customer-update-locker", gatewayreq.KindUpdateLocker, gatewayreq.ClassWrite, http.MethodPatch,
		"/locations/{locationId}/lockers/{lockerId}", "Update a locker (out of service)",
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			GatewayLockerPath
			Body PatchLockerBody
		}) (proxyCall, error) {
			body, err := json.Marshal(in.Body)
			return proxyCall{locationID: in.LocationID, gatewayPath: "/lockers/" + strconv.FormatInt(in.LockerID, 10),
				body: body, idemKey: in.IdempotencyKey}, err
		})
	registerProxy(s, api, tags, "customer-open-locker", gatewayreq.KindOpenLocker, gatewayreq.ClassHardware, http.MethodPost,
		"/locations/{locationId}/lockers/{lockerId}/open", "Open a locker",
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			GatewayLockerPath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/lockers/" + strconv.FormatInt(in.LockerID, 10) + "/open", idemKey: in.IdempotencyKey}, nil
		})

	huma.Register(api, op(huma.Operation{
		OperationID: "customer-get-request", Method: http.MethodGet, Path: "/requests/{id}", Tags: tags,
		Summary: "Poll a pending request",
		Description: "While the request is not terminal: 200 PendingRequest. Once completed: the gateway's status and body verbatim; " +
			"rejected 502 GATEWAY_REJECTED, dispatch_failed 503 DISPATCH_FAILED, gateway_unresponsive 504 GATEWAY_UNRESPONSIVE. " +
			"Prefer: wait=N long-polls up to N seconds for the terminal state. X-Request-State always names the state.",
		Security:  customerSecurity,
		Responses: proxyResponses(api, http.StatusOK),
	}), func(ctx context.Context, in *struct {
		ProxyHeaders
		ID string `path:"id" doc:"The request id (X-Request-Id)"`
	}) (*huma.StreamResponse, error) {
		return s.pollGatewayRequest(ctx, in.ID)
	})
}

// registerProxy registers one proxied operation; build maps its input to the gateway call.
func registerProxy[I any](s *Server, api huma.API, tags []string, id, kind, class, method, path, summary string, build func(*I) (proxyCall, error)) {
	desc := "Proxied to the location's gateway as a gateway request (" + class + "; default wait " + classWaitDoc(class) + "). " +
		"Finished within the wait: the gateway's response verbatim. Otherwise 202 with Location: /api/customer/v1/requests/{id} to poll. " +
		"Terminal failures: 502 GATEWAY_REJECTED, 503 DISPATCH_FAILED, 504 GATEWAY_UNRESPONSIVE."
	huma.Register(api, op(huma.Operation{
		OperationID: id, Method: method, Path: path, Tags: tags, Summary: summary, Description: desc,
		Security: customerSecurity, Responses: proxyResponses(api, http.StatusOK),
	}), func(ctx context.Context, in *I) (*huma.StreamResponse, error) {
		call, err := build(in)
		if err != nil {
			return nil, customerError(http.StatusUnprocessableEntity, "VALIDATION_FAILED", "the request body is not valid", nil)
		}
		call.kind, call.class, call.method = kind, class, method
		if kind == gatewayreq.KindCreateTransaction {
			if call.body, err = createTransactionBody(ctx); err != nil {
				return nil, err
			}
		}
		return s.proxy(ctx, call)
	})
}

func classWaitDoc(class string) string {
	switch class {
	case gatewayreq.ClassHardware:
		return "15 s"
	case gatewayreq.ClassWrite:
		return "10 s"
	}
	return "5 s"
}

// proxyResponses documents the answers of a proxied operation.
func proxyResponses(api huma.API, ok int) map[string]*huma.Response {
	reg := api.OpenAPI().Components.Schemas
	pending := reg.Schema(reflectTypeOf[PendingRequest](), true, "")
	errSchema := reg.Schema(reflectTypeOf[CustomerError](), true, "")
	errResp := func(desc string) *huma.Response {
		return &huma.Response{Description: desc, Content: map[string]*huma.MediaType{"application/json": {Schema: errSchema}}}
	}
	return map[string]*huma.Response{
		strconv.Itoa(ok): {Description: "The gateway's response, verbatim (any 2xx or 4xx of the gateway local API is passed through as is)"},
		"202": {Description: "Not finished within the wait: poll Location", Content: map[string]*huma.MediaType{"application/json": {Schema: pending}},
			Headers: map[string]*huma.Param{
				"Location":        {Schema: &huma.Schema{Type: "string"}, Description: "/api/customer/v1/requests/{id}"},
				"Retry-After":     {Schema: &huma.Schema{Type: "integer"}, Description: "Seconds before polling"},
				"X-Request-State": {Schema: &huma.Schema{Type: "string"}, Description: "pending or dispatched"},
			}},
		"401": errResp("Missing, unknown or revoked key"),
		"404": errResp("No such location (or request) in the key's organization"),
		"422": errResp("Invalid input, or IDEMPOTENCY_KEY_REUSED"),
		"429": errResp("RATE_LIMITED (Retry-After says when to try again)"),
		"502": errResp("GATEWAY_REJECTED: the gateway answered but did not carry out the request"),
		"503": errResp("DISPATCH_FAILED: the request could not be delivered to the gateway"),
		"504": errResp("GATEWAY_UNRESPONSIVE: delivered, but no answer within the deadline"),
	}
}

func reflectTypeOf[T any]() reflect.Type { return reflect.TypeOf((*T)(nil)).Elem() }

// createTransactionBody is the body forwarded for a create: the caller's fields, with the
// request id as transactionId when none was given (set later, see proxy).
func createTransactionBody(ctx context.Context) ([]byte, error) {
	e := edgeOf(ctx)
	var in CreateTransactionBody
	if raw := bytes.TrimSpace(e.rawBody); len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, customerError(http.StatusUnprocessableEntity, "VALIDATION_FAILED", "the request body is not valid", nil)
		}
	}
	return json.Marshal(in)
}

// withTransactionID sets transactionId in a create body that has none.
func withTransactionID(body []byte, id string) []byte {
	var in CreateTransactionBody
	if json.Unmarshal(body, &in) != nil || in.TransactionID != nil {
		return body
	}
	ref := TransactionRef(id)
	in.TransactionID = &ref
	out, err := json.Marshal(in)
	if err != nil {
		return body
	}
	return out
}

// preferences is what the Prefer header asks for, after clamping.
type preferences struct {
	wait    time.Duration
	applied []string
}

// parsePrefer reads RFC 7240 preferences: wait=N (integer seconds, clamped to [0, max]) and
// respond-async (202 at once, unless a wait is given too). Unknown or malformed preferences
// are ignored.
func parsePrefer(values []string, def, maxWait time.Duration) preferences {
	p := preferences{wait: def}
	async, waitSet := false, false
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			token, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			name, val, hasVal := strings.Cut(strings.TrimSpace(token), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "respond-async":
				async = true
			case "wait":
				n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(val), `"`), 10, 64)
				if !hasVal || err != nil || waitSet {
					continue
				}
				waitSet = true
				switch {
				case n <= 0:
					p.wait = 0
				case n >= int64(maxWait/time.Second):
					p.wait = maxWait
				default:
					p.wait = time.Duration(n) * time.Second
				}
			}
		}
	}
	// With both, wait bounds how long to work before answering asynchronously (RFC 7240 §4.3).
	if async {
		p.applied = append(p.applied, "respond-async")
		if !waitSet {
			p.wait = 0
		}
	}
	if waitSet {
		p.applied = append(p.applied, "wait="+strconv.FormatInt(int64(p.wait/time.Second), 10))
	}
	return p
}

func (c *customer) defaultWait(class string) time.Duration {
	switch class {
	case gatewayreq.ClassHardware:
		return c.settings.HardwareWait
	case gatewayreq.ClassWrite:
		return c.settings.WriteWait
	}
	return c.settings.ReadWait
}

func isMutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead
}

// idempotencyHash is the SHA-256 of method, path (with query) and the raw body bytes.
func idempotencyHash(method, uri string, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(uri))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)
}

// proxy runs one proxied operation: store the request (claiming its Idempotency-Key), start
// its workflow, wait, answer.
func (s *Server) proxy(ctx context.Context, call proxyCall) (*huma.StreamResponse, error) {
	k := customerKey(ctx)
	e := edgeOf(ctx)
	began := time.Now()
	gw, err := s.deps.Store.GatewayAtLocation(ctx, k.OrganizationID, call.locationID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, customerError(http.StatusNotFound, "LOCATION_NOT_FOUND", "no location with a gateway has this id",
			map[string]any{"locationId": call.locationID})
	}
	if err != nil {
		return nil, s.customerInternal(ctx, "find gateway", err)
	}
	prefs := parsePrefer(e.prefer, s.customer.defaultWait(call.class), s.customer.settings.MaxWait)
	if prefs.wait > 0 {
		release, ok := s.customer.holdWaiter()
		if !ok {
			return nil, tooManyWaiters()
		}
		defer release()
	}

	id := uuid.New()
	body := call.body
	if call.kind == gatewayreq.KindCreateTransaction {
		body = withTransactionID(body, id.String())
	}
	var idem *store.IdempotencyClaim
	if call.idemKey != "" && isMutating(call.method) {
		idem = &store.IdempotencyClaim{Key: call.idemKey, Hash: idempotencyHash(call.method, e.uri, e.rawBody),
			TTL: s.customer.settings.IdempotencyTTL}
	}
	row, created, err := s.deps.Store.CreateGatewayRequest(ctx, store.NewGatewayRequest{
		ID: id, OrganizationID: k.OrganizationID, LocationID: call.locationID, GatewayID: gw.ID, GatewaySerial: gw.Serial,
		Kind: call.kind, Class: call.class, Method: call.method, Path: e.uri, GatewayPath: call.gatewayPath, Body: body,
	}, idem)
	switch {
	case errors.Is(err, store.ErrIdempotencyKeyReused):
		return nil, customerError(http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED",
			"this Idempotency-Key was used for a request with another method, path or body", map[string]any{"idempotencyKey": call.idemKey})
	case err != nil:
		return nil, s.customerInternal(ctx, "create gateway request", err)
	}
	markTiming(ctx, "store", began)
	replay := !created
	if row.Terminal() {
		return s.answerStored(ctx, row, replay, nil), nil
	}
	return s.answerAfterWait(ctx, row, prefs, replay, http.StatusAccepted), nil
}

// answerAfterWait makes sure the request's workflow runs, waits for its outcome up to the
// preferred wait, and answers the outcome or the pending request (pendingStatus: 202 for a
// new request, 200 for a poll).
func (s *Server) answerAfterWait(ctx context.Context, row store.GatewayRequest, prefs preferences, replay bool, pendingStatus int) *huma.StreamResponse {
	announced, stop := s.customer.outcomes.wait(row.ID)
	defer stop()
	var run client.WorkflowRun
	var err error
	if pendingStatus == http.StatusAccepted {
		// A new request (or its replay): start its workflow, or meet the one started.
		began := time.Now()
		run, err = s.ensureGatewayWorkflow(ctx, row)
		markTiming(ctx, "start", began)
	} else {
		// A poll only waits on the run; it starts it again only if it is gone (awaitOutcome).
		run = s.deps.Temporal.GetWorkflow(ctx, workflows.GatewayRequestWorkflowID(row.ID.String()), "")
	}
	if err != nil {
		// The request is stored; the reconciler starts its workflow once Temporal is back.
		s.logger.WarnContext(ctx, "start gateway request workflow", "requestId", row.ID, "err", err)
	}
	if err != nil || prefs.wait <= 0 {
		// respond-async, wait=0, or a poll without a wait (DESIGN §6.2 "at once"): the row as
		// stored answers, with no wait and no workflow query — a query waits for a workflow
		// task in flight, and with eager start the first task is usually running right now.
		// The row is current: the workflow records each send (dispatched, attempts) before it
		// goes out.
		return s.answerPending(row, replay, prefs.applied, pendingStatus)
	}
	began := time.Now()
	res, done, err := s.awaitOutcome(ctx, run, &row, prefs.wait, announced)
	markTiming(ctx, "wait", began)
	switch {
	case errors.Is(err, context.Canceled):
		s.logger.InfoContext(ctx, "client left while waiting for its gateway request", "requestId", row.ID)
	case err != nil:
		s.logger.ErrorContext(ctx, "wait for gateway request", "requestId", row.ID, "err", err)
	case done && res != nil:
		return s.answerOutcome(row, res.Outcome, res.Attempts, res.UpdatedAt, res.CompletedAt, replay, syncApplied(prefs.applied))
	case done:
		return s.answerStored(ctx, row, replay, syncApplied(prefs.applied))
	}
	// Not finished within the wait: the stored row says what the request is doing now (the
	// outcome is written there before the workflow ends).
	if fresh, err := s.deps.Store.GatewayRequest(ctx, row.OrganizationID, row.ID); err == nil {
		row = fresh
		if row.Terminal() {
			return s.answerStored(ctx, row, replay, syncApplied(prefs.applied))
		}
	}
	return s.answerPending(row, replay, prefs.applied, pendingStatus)
}

// syncApplied is what Preference-Applied says of an answer given synchronously, within the
// wait: respond-async was not applied to it (RFC 7240 §4.3), the wait was.
func syncApplied(applied []string) []string {
	out := make([]string, 0, len(applied))
	for _, a := range applied {
		if a != "respond-async" {
			out = append(out, a)
		}
	}
	return out
}

// gatewayWorkflowInput rebuilds a request's workflow input from its row, so any instance
// can (re)start it identically.
func (s *Server) gatewayWorkflowInput(row store.GatewayRequest) gatewayreq.Spec {
	return row.Spec(s.customer.settings.Policy)
}

// ensureGatewayWorkflow starts the request's workflow, or finds the one already started:
// the id is fixed, so concurrent duplicates and restarts meet the same run.
func (s *Server) ensureGatewayWorkflow(ctx context.Context, row store.GatewayRequest) (client.WorkflowRun, error) {
	id := row.ID.String()
	opts := client.StartWorkflowOptions{
		ID:                       workflows.GatewayRequestWorkflowID(id),
		TaskQueue:                s.customer.settings.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		EnableEagerStart:         !s.customer.settings.DisableEagerStart,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrOrganizationID.ValueSet(strconv.FormatInt(row.OrganizationID, 10)),
			workflows.AttrLocationID.ValueSet(strconv.FormatInt(row.LocationID, 10)),
			workflows.AttrRequestKind.ValueSet(gatewayreq.SearchKind(row.GatewaySerial, row.Kind)),
		),
		Memo: map[string]any{"gatewaySerial": row.GatewaySerial, "method": row.Method, "path": row.Path},
	}
	run, err := s.deps.Temporal.ExecuteWorkflow(ctx, opts, workflows.GatewayRequestWorkflowName, s.gatewayWorkflowInput(row))
	if err != nil {
		return nil, fmt.Errorf("start workflow %s: %w", opts.ID, err)
	}
	return run, nil
}

// awaitGatewayResult waits up to wait for the request's outcome (for callers that read the
// stored row afterwards); done is false when it did not finish in time.
func (s *Server) awaitGatewayResult(ctx context.Context, run client.WorkflowRun, row store.GatewayRequest, wait time.Duration) (gatewayreq.Result, bool, error) {
	announced, stop := s.customer.outcomes.wait(row.ID)
	defer stop()
	res, done, err := s.awaitOutcome(ctx, run, &row, wait, announced)
	switch {
	case err != nil || !done:
		return gatewayreq.Result{}, false, err
	case res != nil:
		return *res, true, nil
	}
	return row.Result(), true, nil
}

// awaitOutcome waits up to wait for the request's outcome: the workflow's result, or
// (sooner) Postgres announcing that the outcome is stored. done is false when it did not
// finish in time; with done, res is the workflow result, or nil when row now holds the stored
// outcome instead.
func (s *Server) awaitOutcome(ctx context.Context, run client.WorkflowRun, row *store.GatewayRequest, wait time.Duration,
	announced <-chan struct{}) (*gatewayreq.Result, bool, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	type got struct {
		res gatewayreq.Result
		err error
	}
	results := make(chan got, 1)
	getResult := func(run client.WorkflowRun) {
		var g got
		g.err = run.Get(wctx, &g.res)
		results <- g
	}
	go getResult(run)
	restarted := false
	for {
		select {
		case <-s.draining:
			// The server is stopping: answer what is known now (202 and the request to poll)
			// rather than hold the client until the drain cuts its connection.
			cancel()
			<-results
			return nil, false, nil
		case <-announced:
			announced = nil
			fresh, err := s.deps.Store.GatewayRequest(ctx, row.OrganizationID, row.ID)
			if err == nil && fresh.Terminal() {
				cancel()
				<-results
				*row = fresh
				return nil, true, nil
			}
		case g := <-results:
			var notFound *serviceerror.NotFound
			var deadline *serviceerror.DeadlineExceeded
			switch {
			case g.err == nil:
				return &g.res, true, nil
			case ctx.Err() != nil:
				return nil, false, ctx.Err()
			case wctx.Err() != nil || errors.As(g.err, &deadline):
				return nil, false, nil
			case errors.As(g.err, &notFound) && !restarted:
				// The run is gone (retention) or never started: start it again from the row.
				restarted = true
				if run, g.err = s.ensureGatewayWorkflow(ctx, *row); g.err != nil {
					return nil, false, g.err
				}
				go getResult(run)
				continue
			}
			return nil, false, fmt.Errorf("get workflow result: %w", g.err)
		}
	}
}

// pollGatewayRequest answers GET /requests/{id}.
func (s *Server) pollGatewayRequest(ctx context.Context, rawID string) (*huma.StreamResponse, error) {
	notFound := customerError(http.StatusNotFound, "REQUEST_NOT_FOUND", "no request with this id", nil)
	id, ok := parseRequestID(rawID)
	if !ok {
		return nil, notFound
	}
	row, err := s.deps.Store.GatewayRequest(ctx, customerKey(ctx).OrganizationID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, s.customerInternal(ctx, "get gateway request", err)
	}
	prefs := parsePrefer(edgeOf(ctx).prefer, 0, s.customer.settings.MaxWait)
	if row.Terminal() {
		return s.answerStored(ctx, row, false, nil), nil
	}
	if prefs.wait > 0 {
		release, ok := s.customer.holdWaiter()
		if !ok {
			return nil, tooManyWaiters()
		}
		defer release()
	}
	return s.answerAfterWait(ctx, row, prefs, false, http.StatusOK), nil
}

// answerStored answers a terminal request from its row.
func (s *Server) answerStored(ctx context.Context, row store.GatewayRequest, replay bool, applied []string) *huma.StreamResponse {
	return s.answerOutcome(row, row.Outcome, row.Attempts, row.UpdatedAt, *row.CompletedAt, replay, applied)
}

// answerOutcome writes a terminal outcome: completed is the gateway's status and body
// verbatim; the other states are their own status with the surface's error body, stamped
// with the completion time so every replay is byte-identical.
func (s *Server) answerOutcome(row store.GatewayRequest, o gatewayreq.Outcome, attempts int, updatedAt, completedAt time.Time,
	replay bool, applied []string) *huma.StreamResponse {
	s.customer.responses.WithLabelValues(row.Class, o.Status).Inc()
	status, body, contentType := o.HTTPStatus, o.Body, o.Headers["Content-Type"]
	if o.Status != gatewayreq.StateCompleted {
		id := row.ID.String()
		details := o.Details
		if details == nil {
			details = map[string]any{}
		}
		e := &CustomerError{status: status, Code: o.ErrorCode, Message: o.ErrorMessage, RequestID: &id,
			Timestamp: ts(completedAt), Details: details}
		b, err := json.Marshal(e)
		if err != nil {
			b = []byte(`{"error":"` + o.ErrorCode + `"}`)
		}
		body, contentType = append(b, '\n'), "application/json"
	}
	if status == 0 {
		status = http.StatusBadGateway
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		s.requestHeaders(hctx, row, o.Status, replay, applied)
		if v := o.Headers["X-Response-Truncated"]; v != "" && o.Status == gatewayreq.StateCompleted {
			hctx.SetHeader("X-Response-Truncated", v)
		}
		if len(body) > 0 && contentType != "" {
			hctx.SetHeader("Content-Type", contentType)
		}
		hctx.SetStatus(status)
		if len(body) > 0 && status != http.StatusNoContent && status != http.StatusNotModified {
			_, _ = hctx.BodyWriter().Write(body)
		}
	}}
}

// answerPending writes the PendingRequest from the stored row: 202 with Location and
// Retry-After for a new request (or its replay), 200 for a poll.
func (s *Server) answerPending(row store.GatewayRequest, replay bool, applied []string, status int) *huma.StreamResponse {
	p := PendingRequest{
		ID: row.ID.String(), Status: row.Status, Kind: row.Kind, Method: row.Method, Path: row.Path,
		LocationID: row.LocationID, GatewayID: row.GatewaySerial, CreatedAt: ts(row.CreatedAt), UpdatedAt: ts(row.UpdatedAt),
		Attempts: row.Attempts,
	}
	s.customer.responses.WithLabelValues(row.Class, "pending").Inc()
	b, _ := json.Marshal(p)
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		s.requestHeaders(hctx, row, p.Status, replay, applied)
		if status == http.StatusAccepted {
			hctx.SetHeader("Location", customerPrefix+"/requests/"+p.ID)
			hctx.SetHeader("Retry-After", "1")
		}
		hctx.SetHeader("Content-Type", "application/json")
		hctx.SetStatus(status)
		_, _ = hctx.BodyWriter().Write(append(b, '\n'))
	}}
}

// requestHeaders sets the headers of every answer about a gateway request (DESIGN §6.4).
func (s *Server) requestHeaders(hctx huma.Context, row store.GatewayRequest, state string, replay bool, applied []string) {
	hctx.SetHeader("X-Request-Id", row.ID.String())
	hctx.SetHeader("X-Gateway-Id", row.GatewaySerial)
	hctx.SetHeader("X-Request-State", state)
	if replay {
		hctx.SetHeader("Idempotent-Replayed", "true")
	}
	if len(applied) > 0 {
		hctx.SetHeader("Preference-Applied", strings.Join(applied, ", "))
	}
	elapsed := time.Since(edgeOf(hctx.Context()).start)
	hctx.SetHeader("X-Request-Duration-Ms", strconv.FormatInt(elapsed.Milliseconds(), 10))
}

// ReconcileGatewayRequests starts the workflow of every request stored but never sent for
// longer than grace, every interval until ctx is done: the apiserver may stop between
// storing a request and starting its workflow, and Temporal may be briefly unreachable.
// Starting is idempotent (fixed workflow ids), so every instance may run it.
func (s *Server) ReconcileGatewayRequests(ctx context.Context, interval, grace time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := s.reconcileGatewayRequests(ctx, grace); err != nil && ctx.Err() == nil {
			s.logger.WarnContext(ctx, "reconcile gateway requests", "err", err)
		} else if n > 0 {
			s.logger.InfoContext(ctx, "started the workflows of stalled gateway requests", "count", n)
		}
	}
}

func (s *Server) reconcileGatewayRequests(ctx context.Context, grace time.Duration) (int, error) {
	rows, err := s.deps.Store.StalledGatewayRequests(ctx, grace, 100)
	if err != nil {
		return 0, err
	}
	for _, row := range rows {
		if _, err := s.ensureGatewayWorkflow(ctx, row); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}
