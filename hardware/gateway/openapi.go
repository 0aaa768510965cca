package gateway

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/hardware/gateway/gwapi"
)

// The local API's own OpenAPI 3.1 document (DESIGN §7, §8), served at GET /openapi.json
// behind the bearer secret and committed as docs/openapi-gateway.yaml. Its schemas are the
// gwapi types the handlers answer with, under the interface document's names; the gateway
// cloud API's document references the same types for the answers it passes through.

// OpenAPI builds the local API's document.
func OpenAPI() *huma.OpenAPI {
	reg := huma.NewMapRegistry("#/components/schemas/", huma.DefaultSchemaNamer)
	schema := func(t reflect.Type) *huma.Schema { return reg.Schema(t, true, "") }
	errSchema := schema(reflect.TypeFor[gwapi.Error]())
	jsonContent := func(s *huma.Schema) map[string]*huma.MediaType {
		return map[string]*huma.MediaType{"application/json": {Schema: s}}
	}
	requestID := &huma.Param{Description: "The request's id: the caller's X-Request-Id when it sent a valid one, else a new UUID",
		Schema: &huma.Schema{Type: "string"}}
	// Every answer of the authenticated API says the gateway honours Idempotency-Key; a
	// mutating operation's repeat with the key says it is the first execution's answer.
	keysHonoured := &huma.Param{Description: "`honoured`: this gateway honours Idempotency-Key on its mutating operations",
		Schema: &huma.Schema{Type: "string", Enum: []any{IdempotencyKeysHonoured}}}
	replayed := &huma.Param{Description: "`true` on the stored answer of an earlier request with the same Idempotency-Key",
		Schema: &huma.Schema{Type: "string", Enum: []any{"true"}}}
	headers := func() map[string]*huma.Param {
		return map[string]*huma.Param{"X-Request-Id": requestID, IdempotencyKeysHeader: keysHonoured, "Idempotent-Replayed": replayed}
	}
	errResp := func(desc string) *huma.Response {
		return &huma.Response{Description: desc, Content: jsonContent(errSchema), Headers: headers()}
	}
	ok := func(status int, desc string, body reflect.Type) map[string]*huma.Response {
		r := &huma.Response{Description: desc, Headers: headers()}
		if body != nil {
			r.Content = jsonContent(schema(body))
		}
		return map[string]*huma.Response{
			strconv.Itoa(status): r,
			"401":                errResp("GATEWAY_AUTH_FAILED: no bearer secret, or a wrong one"),
			"default":            errResp("The error of its code (DESIGN §7)"),
		}
	}
	pathParam := func(name, desc string, typ string) *huma.Param {
		return &huma.Param{Name: name, In: "path", Required: true, Description: desc, Schema: &huma.Schema{Type: typ}}
	}
	lockerID := pathParam("lockerId", "The locker's id", "integer")
	transactionID := pathParam("transactionId", "The transaction's id", "string")
	typeID := pathParam("id", "The type's id", "integer")
	idempotencyKey := &huma.Param{Name: "Idempotency-Key", In: "header", Description: "The first request with a key executes; " +
		"a repeat gets the first execution's stored answer (the cloud sends its gateway request's id)", Schema: &huma.Schema{Type: "string", MaxLength: intPtr(255)}}
	body := func(t reflect.Type) *huma.RequestBody {
		return &huma.RequestBody{Required: true, Content: jsonContent(schema(t))}
	}
	type opDef struct {
		method, path, id, summary, desc string
		params                          []*huma.Param
		body                            *huma.RequestBody
		responses                       map[string]*huma.Response
		tags                            []string
	}
	health, txs, lockers, types, system := []string{"Health and status"}, []string{"Transactions"}, []string{"Lockers"},
		[]string{"Locker types and bank types"}, []string{"System"}

	createResponses := ok(http.StatusCreated, "The transaction, holding a free locker of the criteria (the door is not opened)", reflect.TypeFor[gwapi.TransactionResponse]())
	createResponses["201"].Headers["Location"] = &huma.Param{Description: "/transactions/{transactionId}", Schema: &huma.Schema{Type: "string"}}
	createResponses["409"] = &huma.Response{Description: "TRANSACTION_EXISTS: the transactionId exists; the body is the Error and the existing transaction",
		Content: jsonContent(schema(reflect.TypeFor[gwapi.TransactionConflict]())), Headers: headers()}
	createResponses["404"] = errResp("NO_AVAILABLE_LOCKERS: no free locker matches")
	createResponses["503"] = errResp("LOCKER_ASSIGNMENT_CONFLICT: another request took the last matching locker; retry")
	openResponses := func(desc string) map[string]*huma.Response {
		r := ok(http.StatusOK, desc, reflect.TypeFor[gwapi.LockerOperationResponse]())
		r["500"] = errResp("HARDWARE_FAULT: the controller reported a fault (details.lockerId); REQUEST_OUTCOME_UNKNOWN: the open went out " +
			"to the controller and neither its answer nor a read of the door confirmed it; the gateway does not pulse it again (details.lockerId)")
		r["503"] = errResp("CONTROLLER_UNAVAILABLE: the controller did not answer within the attempts (details.lockerId)")
		return r
	}
	logsResponses := ok(http.StatusOK, "The newest entries, newest first", reflect.TypeFor[[]gwapi.LogEntry]())
	logsResponses["200"].Headers["X-Response-Truncated"] = &huma.Param{Description: "true when more entries matched than limit allows",
		Schema: &huma.Schema{Type: "string", Enum: []any{"true"}}}
	openAll := ok(http.StatusMultiStatus, "One result per locker", reflect.TypeFor[gwapi.OpenAllLockersResponse]())

	ops := []opDef{
		{method: http.MethodGet, path: "/", id: "admin-interface", summary: "Admin interface", tags: health,
			desc: "An HTML page: banks, lockers with door and service state, recent transactions and logs. A browser without the secret gets a login form that sets a session cookie.",
			responses: map[string]*huma.Response{
				"200": {Description: "The admin page", Headers: map[string]*huma.Param{"X-Request-Id": requestID},
					Content: map[string]*huma.MediaType{"text/html": {Schema: &huma.Schema{Type: "string"}}}},
				"401": {Description: "No secret: the login form for a browser (text/html), GATEWAY_AUTH_FAILED for any other client",
					Headers: map[string]*huma.Param{"X-Request-Id": requestID},
					Content: map[string]*huma.MediaType{"text/html": {Schema: &huma.Schema{Type: "string"}}, "application/json": {Schema: errSchema}}},
				"default": errResp("The error of its code (DESIGN §7)"),
			}},
		{method: http.MethodGet, path: "/health", id: "health-check", summary: "Health check", tags: health,
			responses: ok(http.StatusOK, "The gateway's health and its controllers'", reflect.TypeFor[gwapi.Health]())},
		{method: http.MethodGet, path: "/transactions", id: "list-transactions", summary: "List all transactions", tags: txs,
			responses: ok(http.StatusOK, "The active transactions", reflect.TypeFor[[]gwapi.TransactionResponse]())},
		{method: http.MethodPost, path: "/transactions", id: "create-transaction", summary: "Create a transaction", tags: txs,
			params: []*huma.Param{idempotencyKey}, body: body(reflect.TypeFor[gwapi.CreateTransactionBody]()), responses: createResponses},
		{method: http.MethodGet, path: "/transactions/{transactionId}", id: "get-transaction", summary: "Get transaction details", tags: txs,
			params: []*huma.Param{transactionID}, responses: ok(http.StatusOK, "The transaction", reflect.TypeFor[gwapi.TransactionResponse]())},
		{method: http.MethodDelete, path: "/transactions/{transactionId}", id: "release-transaction", summary: "Release transaction", tags: txs,
			desc: "The locker becomes available; no door action.", params: []*huma.Param{transactionID, idempotencyKey},
			responses: ok(http.StatusNoContent, "Released", nil)},
		{method: http.MethodPost, path: "/transactions/{transactionId}/open", id: "open-transaction", summary: "Open locker by transaction ID", tags: txs,
			params: []*huma.Param{transactionID, idempotencyKey}, responses: openResponses("The door was opened")},
		{method: http.MethodGet, path: "/lockers", id: "list-lockers", summary: "List all lockers", tags: lockers,
			responses: ok(http.StatusOK, "Every locker", reflect.TypeFor[[]gwapi.Locker]())},
		{method: http.MethodGet, path: "/lockers/config", id: "locker-config", summary: "Get locker configuration", tags: lockers,
			responses: ok(http.StatusOK, "Banks, their controllers and wiring", reflect.TypeFor[gwapi.LockerConfig]())},
		{method: http.MethodGet, path: "/lockers/{lockerId}", id: "get-locker", summary: "Get locker details", tags: lockers,
			params: []*huma.Param{lockerID}, responses: ok(http.StatusOK, "The locker", reflect.TypeFor[gwapi.Locker]())},
		{method: http.MethodPatch, path: "/lockers/{lockerId}", id: "update-locker", summary: "Update locker service state", tags: lockers,
			params: []*huma.Param{lockerID, idempotencyKey}, body: body(reflect.TypeFor[gwapi.PatchLockerBody]()),
			responses: ok(http.StatusOK, "The locker's new state", reflect.TypeFor[gwapi.LockerOperationResponse]())},
		{method: http.MethodPost, path: "/lockers/{lockerId}/open", id: "open-locker", summary: "Open locker by ID", tags: lockers,
			desc: "A maintenance open: ignores transaction and service state.", params: []*huma.Param{lockerID, idempotencyKey},
			responses: openResponses("The door was opened")},
		{method: http.MethodPost, path: "/lockers/open-all", id: "open-all", summary: "Open all lockers", tags: lockers,
			params: []*huma.Param{idempotencyKey}, responses: openAll},
		{method: http.MethodGet, path: "/locker-types", id: "list-locker-types", summary: "List all locker types", tags: types,
			responses: ok(http.StatusOK, "Every locker type", reflect.TypeFor[[]gwapi.LockerTypeSummary]())},
		{method: http.MethodGet, path: "/locker-types/{id}", id: "get-locker-type", summary: "Get locker type details", tags: types,
			params: []*huma.Param{typeID}, responses: ok(http.StatusOK, "The locker type", reflect.TypeFor[gwapi.LockerType]())},
		{method: http.MethodGet, path: "/bank-types", id: "list-bank-types", summary: "List all bank types", tags: types,
			responses: ok(http.StatusOK, "Every bank type", reflect.TypeFor[[]gwapi.BankType]())},
		{method: http.MethodGet, path: "/bank-types/{id}", id: "get-bank-type", summary: "Get bank type with associations", tags: types,
			params: []*huma.Param{typeID}, responses: ok(http.StatusOK, "The bank type", reflect.TypeFor[gwapi.BankTypeWithAssociations]())},
		{method: http.MethodPost, path: "/system/heartbeat", id: "device-heartbeat", summary: "Receive heartbeat from external device", tags: system,
			params: []*huma.Param{idempotencyKey}, body: body(reflect.TypeFor[gwapi.DeviceHeartbeatRequest]()), responses: ok(http.StatusNoContent, "Recorded", nil)},
		{method: http.MethodGet, path: "/system", id: "system-info", summary: "System info", tags: system,
			responses: ok(http.StatusOK, "The gateway and its controllers", reflect.TypeFor[gwapi.System]())},
		{method: http.MethodGet, path: "/system/logs", id: "system-logs", summary: "System logs", tags: system,
			params: []*huma.Param{{Name: "limit", In: "query", Description: "Newest entries to return (default 100)",
				Schema: &huma.Schema{Type: "integer", Minimum: floatPtr(1), Maximum: floatPtr(1000)}}},
			responses: logsResponses},
		{method: http.MethodGet, path: "/alerts", id: "list-alerts", summary: "Alerts of the lock-controller watch", tags: system,
			desc: "The alerts raised by the watch of the lock controllers (door_ajar, forced_open, item_left, controller_offline, " +
				"controller_online), oldest first, those with seq > after. A long poll: with wait > 0 and no such alert yet, the " +
				"answer comes when one is raised, or after wait seconds with none, or at once when the gateway begins to stop.",
			params: []*huma.Param{
				{Name: "after", In: "query", Description: "Only alerts with a greater seq (default 0: from the oldest kept)",
					Schema: &huma.Schema{Type: "integer", Minimum: floatPtr(0)}},
				{Name: "limit", In: "query", Description: "At most this many alerts (default 100)",
					Schema: &huma.Schema{Type: "integer", Minimum: floatPtr(1), Maximum: floatPtr(maxAlertLimit)}},
				{Name: "wait", In: "query", Description: "Seconds to wait for an alert when there is none (default 0: answer at once)",
					Schema: &huma.Schema{Type: "integer", Minimum: floatPtr(0), Maximum: floatPtr(MaxAlertWait)}},
			},
			responses: ok(http.StatusOK, "The alerts, and the after= of the next call", reflect.TypeFor[gwapi.AlertList]())},
		{method: http.MethodGet, path: "/openapi.json", id: "openapi", summary: "This document", tags: system,
			responses: ok(http.StatusOK, "The local API's OpenAPI 3.1 document", reflect.TypeFor[map[string]any]())},
	}

	doc := &huma.OpenAPI{
		OpenAPI: "3.1.0",
		Info: &huma.Info{Title: "Locker gateway local API", Version: "1.0.0",
			Description: "The API of the gateway computer inside a locker installation, on its LAN (DESIGN §7). Every operation needs the gateway's bearer secret."},
		Servers: []*huma.Server{{URL: "http://127.0.0.1:8101", Description: "make run's GW-0001 (GW-0002 on 8102)"}},
		Components: &huma.Components{Schemas: reg, SecuritySchemes: map[string]*huma.SecurityScheme{
			"gatewaySecret": {Type: "http", Scheme: "bearer", Description: "The gateway's secret (at least 32 random bytes); the admin page also takes a session cookie."},
		}},
		Security: []map[string][]string{{"gatewaySecret": {}}},
		Paths:    map[string]*huma.PathItem{},
	}
	for _, o := range ops {
		item := doc.Paths[o.path]
		if item == nil {
			item = &huma.PathItem{}
			doc.Paths[o.path] = item
		}
		op := &huma.Operation{OperationID: o.id, Summary: o.summary, Description: o.desc, Tags: o.tags,
			Parameters: o.params, RequestBody: o.body, Responses: o.responses}
		switch o.method {
		case http.MethodGet:
			item.Get = op
		case http.MethodPost:
			item.Post = op
		case http.MethodPatch:
			item.Patch = op
		case http.MethodDelete:
			item.Delete = op
		}
	}
	// The interface document's 17 names: those no operation references directly are named
	// components too (OperationResponse, MultiStatusOperationResponse).
	schema(reflect.TypeFor[gwapi.OperationResponse]())
	schema(reflect.TypeFor[gwapi.MultiStatusOperationResponse]())
	return doc
}

func intPtr(v int) *int { return &v }

func floatPtr(v float64) *float64 { return &v }

// OpenAPIJSON is the document as GET /openapi.json serves it.
var OpenAPIJSON = sync.OnceValues(func() ([]byte, error) { return json.Marshal(OpenAPI()) })

// openAPIDocument serves the document (GET /openapi.json).
func (s *Server) openAPIDocument(w http.ResponseWriter, _ *http.Request) error {
	b, err := OpenAPIJSON()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(b)
	return err
}
