package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/hardware/gateway/gwapi"
	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// The gateway cloud API's route table of gateway requests (DESIGN §6.1): every proxied
// operation is a gateway-request/<id> workflow (internal/gatewayexec) of a kind and class; the
// handler maps its input to the gateway local-API call and hands it to proxy (cloud_proxy.go).

// proxyCall is one proxied operation as the handler resolved it.
type proxyCall struct {
	kind, class string
	locationID  int64
	method      string
	gatewayPath string
	body        []byte // forwarded to the gateway (nil: none)
	idemKey     string
}

// proxyRoute is one proxied operation: its operation id, gateway-request kind and class, and
// the gateway local-API call it makes, whose path is the operation's below
// /locations/{locationId} (DESIGN §6.1).
type proxyRoute struct {
	id, kind, class, method, gatewayPath, summary string
	answer                                        gatewayAnswer
}

// The inputs of the proxied operations: the Prefer header, the location, and by operation the
// Idempotency-Key and the transaction, locker or type the path names.
type (
	locationIn struct {
		ProxyHeaders
		LocationPath
	}
	transactionIn struct {
		ProxyHeaders
		LocationPath
		TransactionPath
	}
	lockerIn struct {
		ProxyHeaders
		LocationPath
		GatewayLockerPath
	}
	typeIn struct {
		ProxyHeaders
		LocationPath
		TypePath
	}
	keyedTransactionIn struct {
		ProxyHeaders
		IdempotencyHeader
		LocationPath
		TransactionPath
	}
	keyedLockerIn struct {
		ProxyHeaders
		IdempotencyHeader
		LocationPath
		GatewayLockerPath
	}
)

// What an input lends the gateway call: its location, its Idempotency-Key, and the path
// parameter it fills in the gateway path.
func (p LocationPath) location() int64  { return p.LocationID }
func (h IdempotencyHeader) key() string { return h.IdempotencyKey }
func (p TransactionPath) fill(path string) string {
	return strings.Replace(path, "{transactionId}", url.PathEscape(p.TransactionID), 1)
}
func (p GatewayLockerPath) fill(path string) string {
	return strings.Replace(path, "{lockerId}", strconv.FormatInt(p.LockerID, 10), 1)
}
func (p TypePath) fill(path string) string {
	return strings.Replace(path, "{id}", strconv.FormatInt(p.ID, 10), 1)
}

// callOf is the gateway call of a proxied operation's input: the gateway path with the
// input's path parameter filled in, the location and the Idempotency-Key.
func callOf(in any, gatewayPath string) proxyCall {
	c := proxyCall{gatewayPath: gatewayPath}
	if l, ok := in.(interface{ location() int64 }); ok {
		c.locationID = l.location()
	}
	if f, ok := in.(interface{ fill(string) string }); ok {
		c.gatewayPath = f.fill(c.gatewayPath)
	}
	if k, ok := in.(interface{ key() string }); ok {
		c.idemKey = k.key()
	}
	return c
}

func (s *Server) registerGatewayRequests(api huma.API, tags []string) {
	read := func(id, kind, path, summary string, answer gatewayAnswer) proxyRoute {
		return proxyRoute{id: id, kind: kind, class: gatewayreq.ClassRead, method: http.MethodGet, gatewayPath: path, summary: summary, answer: answer}
	}
	registerProxies[locationIn](s, api, tags,
		read("customer-gateway-health", gatewayreq.KindHealth, "/health", "Gateway health check", answerOf[gwapi.Health](http.StatusOK)),
		read("customer-gateway-system", gatewayreq.KindSystem, "/system", "Gateway system info", answerOf[gwapi.System](http.StatusOK)),
		read("customer-list-transactions", gatewayreq.KindListTransactions, "/transactions", "List transactions",
			answerOf[[]gwapi.TransactionResponse](http.StatusOK)),
		read("customer-list-lockers", gatewayreq.KindListLockers, "/lockers", "List lockers", answerOf[[]gwapi.Locker](http.StatusOK)),
		read("customer-locker-config", gatewayreq.KindLockerConfig, "/lockers/config", "Locker configuration",
			answerOf[gwapi.LockerConfig](http.StatusOK)),
		read("customer-list-locker-types", gatewayreq.KindListLockerTypes, "/locker-types", "List locker types",
			answerOf[[]gwapi.LockerTypeSummary](http.StatusOK)),
		read("customer-list-bank-types", gatewayreq.KindListBankTypes, "/bank-types", "List bank types",
			answerOf[[]gwapi.BankType](http.StatusOK)))

	registerProxy(s, api, tags, read("customer-gateway-logs", gatewayreq.KindSystemLogs, "/system/logs", "Gateway logs",
		answerOf[[]gwapi.LogEntry](http.StatusOK)),
		func(in *struct {
			ProxyHeaders
			LocationPath
			Limit int `query:"limit" minimum:"1" maximum:"1000" doc:"Newest entries to return (default 100); X-Response-Truncated: true when more matched"`
		}, c proxyCall) (proxyCall, error) {
			if in.Limit > 0 {
				c.gatewayPath += "?limit=" + strconv.Itoa(in.Limit)
			}
			return c, nil
		})
	registerProxies[transactionIn](s, api, tags, read("customer-get-transaction", gatewayreq.KindGetTransaction,
		"/transactions/{transactionId}", "Fetch a transaction", answerOf[gwapi.TransactionResponse](http.StatusOK)))
	registerProxies[lockerIn](s, api, tags, read("customer-get-locker", gatewayreq.KindGetLocker,
		"/lockers/{lockerId}", "Fetch a locker", answerOf[gwapi.Locker](http.StatusOK)))
	registerProxies[typeIn](s, api, tags,
		read("customer-get-locker-type", gatewayreq.KindGetLockerType, "/locker-types/{id}", "Fetch a locker type",
			answerOf[gwapi.LockerType](http.StatusOK)),
		read("customer-get-bank-type", gatewayreq.KindGetBankType, "/bank-types/{id}", "Fetch a bank type",
			answerOf[gwapi.BankTypeWithAssociations](http.StatusOK)))

	registerProxy(s, api, tags, proxyRoute{id: "customer-create-transaction", kind: gatewayreq.KindCreateTransaction,
		class: gatewayreq.ClassWrite, method: http.MethodPost, gatewayPath: "/transactions", summary: "Create a transaction",
		answer: answerOf[gwapi.TransactionResponse](http.StatusCreated)},
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			Body *CreateTransactionBody
		}, c proxyCall) (proxyCall, error) {
			return c, nil // the body: createTransactionBody, in registerProxy
		})
	registerProxies[keyedTransactionIn](s, api, tags,
		proxyRoute{id: "customer-release-transaction", kind: gatewayreq.KindReleaseTransaction, class: gatewayreq.ClassWrite,
			method: http.MethodDelete, gatewayPath: "/transactions/{transactionId}", summary: "Release a transaction",
			answer: gatewayAnswer{status: http.StatusNoContent}},
		proxyRoute{id: "customer-open-transaction", kind: gatewayreq.KindOpenTransaction, class: gatewayreq.ClassHardware,
			method: http.MethodPost, gatewayPath: "/transactions/{transactionId}/open", summary: "Open the locker assigned to a transaction",
			answer: answerOf[gwapi.LockerOperationResponse](http.StatusOK)})
	registerProxy(s, api, tags, proxyRoute{id: "customer-update-locker", kind: gatewayreq.KindUpdateLocker, class: gatewayreq.ClassWrite,
		method: http.MethodPatch, gatewayPath: "/lockers/{lockerId}", summary: "Update a locker (out of service)",
		answer: answerOf[gwapi.LockerOperationResponse](http.StatusOK)},
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			GatewayLockerPath
			Body PatchLockerBody
		}, c proxyCall) (proxyCall, error) {
			var err error
			c.body, err = json.Marshal(in.Body)
			return c, err
		})
	registerProxies[keyedLockerIn](s, api, tags, proxyRoute{id: "customer-open-locker", kind: gatewayreq.KindOpenLocker,
		class: gatewayreq.ClassHardware, method: http.MethodPost, gatewayPath: "/lockers/{lockerId}/open", summary: "Open a locker",
		answer: answerOf[gwapi.LockerOperationResponse](http.StatusOK)})

	huma.Register(api, op(huma.Operation{
		OperationID: "customer-get-request", Method: http.MethodGet, Path: "/requests/{id}", Tags: tags,
		Summary: "Poll a pending request",
		Description: "While the request is not terminal: 200 PendingRequest. Once completed: the gateway's status and body verbatim; " +
			"rejected 502 GATEWAY_REJECTED, dispatch_failed 503 DISPATCH_FAILED, gateway_unresponsive 504 GATEWAY_UNRESPONSIVE. " +
			"Prefer: wait=N long-polls up to N seconds for the terminal state. X-Request-State always names the state.",
		Security:  cloudSecurity,
		Responses: pollResponses(api),
		Metadata:  map[string]any{metaGatewayRequest: true, metaTruncates: true},
	}), func(ctx context.Context, in *struct {
		ProxyHeaders
		ID string `path:"id" doc:"The request id (X-Request-Id)"`
	}) (*huma.StreamResponse, error) {
		return s.pollGatewayRequest(ctx, in.ID)
	})
}

// registerProxies registers proxied operations whose input I says all the gateway call needs
// (callOf).
func registerProxies[I any](s *Server, api huma.API, tags []string, routes ...proxyRoute) {
	for _, r := range routes {
		registerProxy(s, api, tags, r, func(_ *I, c proxyCall) (proxyCall, error) { return c, nil })
	}
}

// registerProxy registers one proxied operation; build completes the gateway call callOf
// made of its input (a query, a body).
func registerProxy[I any](s *Server, api huma.API, tags []string, r proxyRoute, build func(*I, proxyCall) (proxyCall, error)) {
	id, kind, class, method := r.id, r.kind, r.class, r.method
	answer := r.answer
	desc := "Proxied to the location's gateway as a gateway request (" + class + "; default wait " + classWaitDoc(class) + "). " +
		"Finished within the wait: the gateway's response verbatim. Otherwise 202 with Location: /api/customer/v1/requests/{id} to poll. " +
		"Terminal failures: 502 GATEWAY_REJECTED, 503 DISPATCH_FAILED, 504 GATEWAY_UNRESPONSIVE."
	huma.Register(api, op(huma.Operation{
		OperationID: id, Method: method, Path: "/locations/{locationId}" + r.gatewayPath, Tags: tags, Summary: r.summary, Description: desc,
		Security: cloudSecurity, Responses: proxyResponses(api, answer), DefaultStatus: answer.status,
		Metadata: map[string]any{metaKeyWithStore: true, metaGatewayRequest: true, metaTruncates: kind == gatewayreq.KindSystemLogs},
	}), func(ctx context.Context, in *I) (*huma.StreamResponse, error) {
		call, err := build(in, callOf(in, r.gatewayPath))
		if err != nil {
			return nil, s.cloudFailure(ctx, "proxy", errBodyInvalid)
		}
		call.kind, call.class, call.method = kind, class, method
		if kind == gatewayreq.KindCreateTransaction {
			if call.body, err = createTransactionBody(ctx); err != nil {
				return nil, s.cloudFailure(ctx, "proxy", err)
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

// gatewayAnswer is a proxied operation's answer when the gateway carried it out: the
// gateway's status and body schema (nil: no body), from the gateway's own types (gwapi).
type gatewayAnswer struct {
	status int
	body   reflect.Type
}

func answerOf[T any](status int) gatewayAnswer {
	return gatewayAnswer{status: status, body: reflectTypeOf[T]()}
}

// gatewayAnswers are the gateway's success answers of every proxied operation, which a poll
// may return once its request completed.
var gatewayAnswers = []gatewayAnswer{
	answerOf[gwapi.Health](http.StatusOK), answerOf[gwapi.System](http.StatusOK), answerOf[[]gwapi.LogEntry](http.StatusOK),
	answerOf[[]gwapi.TransactionResponse](http.StatusOK), answerOf[gwapi.TransactionResponse](http.StatusOK),
	answerOf[[]gwapi.Locker](http.StatusOK), answerOf[gwapi.Locker](http.StatusOK), answerOf[gwapi.LockerConfig](http.StatusOK),
	answerOf[[]gwapi.LockerTypeSummary](http.StatusOK), answerOf[gwapi.LockerType](http.StatusOK),
	answerOf[[]gwapi.BankType](http.StatusOK), answerOf[gwapi.BankTypeWithAssociations](http.StatusOK),
	answerOf[gwapi.LockerOperationResponse](http.StatusOK),
	answerOf[gwapi.TransactionResponse](http.StatusCreated), {status: http.StatusNoContent},
}

// gatewayErrorStatuses are the 4xx the gateway local API answers (passed through verbatim as
// completed, DESIGN §6.2) besides those the cloud answers itself.
var gatewayErrorStatuses = []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge,
	http.StatusUnprocessableEntity}

// proxyResponses documents the answers of a proxied operation.
func proxyResponses(api huma.API, answer gatewayAnswer) map[string]*huma.Response {
	reg := api.OpenAPI().Components.Schemas
	out := gatewayRequestResponses(api)
	ok := &huma.Response{Description: "Finished within the wait: the gateway's response, verbatim"}
	if answer.body != nil {
		ok.Content = map[string]*huma.MediaType{"application/json": {Schema: reg.Schema(answer.body, true, "")}}
	}
	out[strconv.Itoa(answer.status)] = ok
	out["202"] = &huma.Response{Description: "Not finished within the wait: poll Location",
		Content: map[string]*huma.MediaType{"application/json": {Schema: reg.Schema(reflectTypeOf[PendingRequest](), true, "")}},
		Headers: map[string]*huma.Param{
			"Location": {Schema: &huma.Schema{Type: "string"}, Description: "/api/customer/v1/requests/{id}"},
		}}
	return out
}

// pollResponses documents GET /requests/{id}: the pending request while it is not terminal,
// then what the operation itself would have answered.
func pollResponses(api huma.API) map[string]*huma.Response {
	reg := api.OpenAPI().Components.Schemas
	out := gatewayRequestResponses(api)
	byStatus := map[int][]*huma.Schema{}
	for _, a := range gatewayAnswers {
		if a.body != nil {
			byStatus[a.status] = append(byStatus[a.status], reg.Schema(a.body, true, ""))
		} else if _, ok := byStatus[a.status]; !ok {
			byStatus[a.status] = nil
		}
	}
	for status, schemas := range byStatus {
		r := &huma.Response{Description: "The request completed: the gateway's response, verbatim"}
		if status == http.StatusOK {
			// oneOf: a pending request is never one of the gateway's bodies (their schemas allow
			// no other properties); the gateway's bodies may overlap (an empty list is any list).
			r.Description = "While the request is not terminal (X-Request-State pending or dispatched): PendingRequest. Once completed: the gateway's response, verbatim"
			r.Content = map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{OneOf: []*huma.Schema{
				reg.Schema(reflectTypeOf[PendingRequest](), true, ""), {AnyOf: schemas}}}}}
		} else if len(schemas) == 1 {
			r.Content = map[string]*huma.MediaType{"application/json": {Schema: schemas[0]}}
		} else if len(schemas) > 1 {
			r.Content = map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{AnyOf: schemas}}}
		}
		out[strconv.Itoa(status)] = r
	}
	return out
}

// gatewayRequestResponses are the error answers of every operation about a gateway request.
func gatewayRequestResponses(api huma.API) map[string]*huma.Response {
	reg := api.OpenAPI().Components.Schemas
	errSchema := reg.Schema(reflectTypeOf[CloudError](), true, "")
	gwErr := reg.Schema(reflectTypeOf[gwapi.Error](), true, "")
	errResp := func(desc string, schemas ...*huma.Schema) *huma.Response {
		schema := errSchema
		if len(schemas) > 0 {
			schema = &huma.Schema{AnyOf: append([]*huma.Schema{errSchema}, schemas...)}
		}
		return &huma.Response{Description: desc, Content: map[string]*huma.MediaType{"application/json": {Schema: schema}}}
	}
	out := map[string]*huma.Response{
		"401": errResp("Missing, unknown or revoked key"),
		"429": errResp("RATE_LIMITED (Retry-After says when to try again)"),
		"502": errResp("GATEWAY_REJECTED: the gateway answered but did not carry out the request"),
		"503": errResp("DISPATCH_FAILED: the request could not be delivered to the gateway (or SERVICE_UNAVAILABLE: overloaded, Retry-After)"),
		"504": errResp("GATEWAY_UNRESPONSIVE: delivered, but no answer within the deadline"),
	}
	for _, st := range gatewayErrorStatuses {
		desc := "The gateway's error, verbatim (GatewayError), or the cloud's own (Error)"
		extra := []*huma.Schema{gwErr}
		switch st {
		case http.StatusNotFound:
			desc = "No such location (or request) in the key's organization (Error), or the gateway's 404 verbatim (GatewayError)"
		case http.StatusConflict:
			desc = "The gateway's 409 verbatim: a transaction create with a transactionId that exists answers the existing transaction (GatewayTransactionConflict)"
			extra = append(extra, reg.Schema(reflectTypeOf[gwapi.TransactionConflict](), true, ""))
		case http.StatusUnprocessableEntity:
			desc = "Invalid input or IDEMPOTENCY_KEY_REUSED (Error), or the gateway's validation error verbatim (GatewayError)"
		}
		out[strconv.Itoa(st)] = errResp(desc, extra...)
	}
	out["default"] = errResp("Any other error of the cloud")
	return out
}

func reflectTypeOf[T any]() reflect.Type { return reflect.TypeOf((*T)(nil)).Elem() }
