package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"

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

func (s *Server) registerGatewayRequests(api huma.API, tags []string) {
	type readIn struct {
		ProxyHeaders
		LocationPath
	}
	read := func(id, kind, path, summary string, answer gatewayAnswer, gatewayPath func(*readIn) string) {
		registerProxy(s, api, tags, id, kind, gatewayreq.ClassRead, http.MethodGet, path, summary, answer,
			func(in *readIn) (proxyCall, error) {
				return proxyCall{locationID: in.LocationID, gatewayPath: gatewayPath(in)}, nil
			})
	}
	read("customer-gateway-health", gatewayreq.KindHealth, "/locations/{locationId}/health", "Gateway health check",
		answerOf[gwapi.Health](http.StatusOK), func(*readIn) string { return "/health" })
	read("customer-gateway-system", gatewayreq.KindSystem, "/locations/{locationId}/system", "Gateway system info",
		answerOf[gwapi.System](http.StatusOK), func(*readIn) string { return "/system" })
	read("customer-list-transactions", gatewayreq.KindListTransactions, "/locations/{locationId}/transactions", "List transactions",
		answerOf[[]gwapi.TransactionResponse](http.StatusOK), func(*readIn) string { return "/transactions" })
	read("customer-list-lockers", gatewayreq.KindListLockers, "/locations/{locationId}/lockers", "List lockers",
		answerOf[[]gwapi.Locker](http.StatusOK), func(*readIn) string { return "/lockers" })
	read("customer-locker-config", gatewayreq.KindLockerConfig, "/locations/{locationId}/lockers/config", "Locker configuration",
		answerOf[gwapi.LockerConfig](http.StatusOK), func(*readIn) string { return "/lockers/config" })
	read("customer-list-locker-types", gatewayreq.KindListLockerTypes, "/locations/{locationId}/locker-types", "List locker types",
		answerOf[[]gwapi.LockerTypeSummary](http.StatusOK), func(*readIn) string { return "/locker-types" })
	read("customer-list-bank-types", gatewayreq.KindListBankTypes, "/locations/{locationId}/bank-types", "List bank types",
		answerOf[[]gwapi.BankType](http.StatusOK), func(*readIn) string { return "/bank-types" })

	registerProxy(s, api, tags, "customer-gateway-logs", gatewayreq.KindSystemLogs, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/system/logs", "Gateway logs", answerOf[[]gwapi.LogEntry](http.StatusOK),
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
		"/locations/{locationId}/transactions/{transactionId}", "Fetch a transaction", answerOf[gwapi.TransactionResponse](http.StatusOK),
		func(in *struct {
			ProxyHeaders
			LocationPath
			TransactionPath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/transactions/" + url.PathEscape(in.TransactionID)}, nil
		})
	registerProxy(s, api, tags, "customer-get-locker", gatewayreq.KindGetLocker, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/lockers/{lockerId}", "Fetch a locker", answerOf[gwapi.Locker](http.StatusOK),
		func(in *struct {
			ProxyHeaders
			LocationPath
			GatewayLockerPath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/lockers/" + strconv.FormatInt(in.LockerID, 10)}, nil
		})
	registerProxy(s, api, tags, "customer-get-locker-type", gatewayreq.KindGetLockerType, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/locker-types/{id}", "Fetch a locker type", answerOf[gwapi.LockerType](http.StatusOK),
		func(in *struct {
			ProxyHeaders
			LocationPath
			TypePath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/locker-types/" + strconv.FormatInt(in.ID, 10)}, nil
		})
	registerProxy(s, api, tags, "customer-get-bank-type", gatewayreq.KindGetBankType, gatewayreq.ClassRead, http.MethodGet,
		"/locations/{locationId}/bank-types/{id}", "Fetch a bank type", answerOf[gwapi.BankTypeWithAssociations](http.StatusOK),
		func(in *struct {
			ProxyHeaders
			LocationPath
			TypePath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/bank-types/" + strconv.FormatInt(in.ID, 10)}, nil
		})

	registerProxy(s, api, tags, "customer-create-transaction", gatewayreq.KindCreateTransaction, gatewayreq.ClassWrite, http.MethodPost,
		"/locations/{locationId}/transactions", "Create a transaction", answerOf[gwapi.TransactionResponse](http.StatusCreated),
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			Body *CreateTransactionBody
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/transactions", idemKey: in.IdempotencyKey}, nil
		})
	registerProxy(s, api, tags, "customer-release-transaction", gatewayreq.KindReleaseTransaction, gatewayreq.ClassWrite, http.MethodDelete,
		"/locations/{locationId}/transactions/{transactionId}", "Release a transaction", gatewayAnswer{status: http.StatusNoContent},
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
		answerOf[gwapi.LockerOperationResponse](http.StatusOK),
		func(in *struct {
			ProxyHeaders
			IdempotencyHeader
			LocationPath
			TransactionPath
		}) (proxyCall, error) {
			return proxyCall{locationID: in.LocationID, gatewayPath: "/transactions/" + url.PathEscape(in.TransactionID) + "/open", idemKey: in.IdempotencyKey}, nil
		})
	registerProxy(s, api, tags, "customer-update-locker", gatewayreq.KindUpdateLocker, gatewayreq.ClassWrite, http.MethodPatch,
		"/locations/{locationId}/lockers/{lockerId}", "Update a locker (out of service)", answerOf[gwapi.LockerOperationResponse](http.StatusOK),
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
		"/locations/{locationId}/lockers/{lockerId}/open", "Open a locker", answerOf[gwapi.LockerOperationResponse](http.StatusOK),
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

// registerProxy registers one proxied operation; build maps its input to the gateway call.
func registerProxy[I any](s *Server, api huma.API, tags []string, id, kind, class, method, path, summary string, answer gatewayAnswer,
	build func(*I) (proxyCall, error)) {
	desc := "Proxied to the location's gateway as a gateway request (" + class + "; default wait " + classWaitDoc(class) + "). " +
		"Finished within the wait: the gateway's response verbatim. Otherwise 202 with Location: /api/customer/v1/requests/{id} to poll. " +
		"Terminal failures: 502 GATEWAY_REJECTED, 503 DISPATCH_FAILED, 504 GATEWAY_UNRESPONSIVE."
	huma.Register(api, op(huma.Operation{
		OperationID: id, Method: method, Path: path, Tags: tags, Summary: summary, Description: desc,
		Security: cloudSecurity, Responses: proxyResponses(api, answer), DefaultStatus: answer.status,
		Metadata: map[string]any{metaKeyWithStore: true, metaGatewayRequest: true, metaTruncates: kind == gatewayreq.KindSystemLogs},
	}), func(ctx context.Context, in *I) (*huma.StreamResponse, error) {
		call, err := build(in)
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
