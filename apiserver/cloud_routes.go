package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// The gateway cloud API's route table of gateway requests (DESIGN §6.1): every proxied
// operation is a gateway-request/<id> workflow (gateway_requests.go) of a kind and class; the
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
		Metadata: map[string]any{metaKeyWithStore: true},
	}), func(ctx context.Context, in *I) (*huma.StreamResponse, error) {
		call, err := build(in)
		if err != nil {
			return nil, s.customerFailure(ctx, "proxy", errBodyInvalid)
		}
		call.kind, call.class, call.method = kind, class, method
		if kind == gatewayreq.KindCreateTransaction {
			if call.body, err = createTransactionBody(ctx); err != nil {
				return nil, s.customerFailure(ctx, "proxy", err)
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
