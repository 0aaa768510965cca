package apiserver

import (
	"net/http"
	"reflect"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/hardware/gateway/gwapi"
)

// The published contract (DESIGN §8): what openapi.json says beyond what huma derives from
// the operations — the servers, the schema names of the interface document, each surface's
// own error body as the default answer, and the response headers each surface sends. The
// contract test (openapi_contract_test.go) validates the integration tests' answers against
// the result.

// Servers are the deployments the document describes (docs/environments.md): make run's, and
// the example addresses of the sandbox and production (each deployment's
// LOCKERNET_PUBLIC_URL).
var Servers = []*huma.Server{
	{URL: "http://127.0.0.1:8080", Description: "local: make run"},
	{URL: "https://sandbox.api.lockers.example", Description: "sandbox (example address: the deployment's LOCKERNET_PUBLIC_URL)"},
	{URL: "https://api.lockers.example", Description: "production (example address: the deployment's LOCKERNET_PUBLIC_URL)"},
}

var (
	gwapiPkg       = reflect.TypeOf(gwapi.Locker{}).PkgPath()
	cloudErrorType = reflect.TypeOf(CloudError{})
)

// schemaName names the components: huma's default, except that the gateway cloud API's error
// body is the interface document's Error, and the gateway local API's schemas (gwapi), which
// the cloud passes through verbatim, keep their local names behind a Gateway prefix
// (GatewayLocker is the gateway's Locker, GatewayError its Error: docs/openapi-gateway.yaml).
// The other surfaces' error bodies keep their own names (ErrorModel, OAuthError).
func schemaName(t reflect.Type, hint string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == cloudErrorType:
		return "Error"
	case t.PkgPath() == gwapiPkg:
		return "Gateway" + huma.DefaultSchemaNamer(t, hint)
	case t.Name() == "" && hint != "":
		return anonymousName(hint)
	}
	return huma.DefaultSchemaNamer(t, hint)
}

// anonymousName names an operation's unnamed body from huma's hint (operation id + Request
// or Response) in the components' style: "rotate-webhook-secretResponse" becomes
// RotateWebhookSecretBody (a generated client names its own response types
// <Operation>Response).
func anonymousName(hint string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(hint, func(r rune) bool { return r == '-' || r == '_' || r == ' ' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	name := b.String()
	if base, ok := strings.CutSuffix(name, "Response"); ok {
		name = base + "Body"
	}
	return name
}

// Response headers (DESIGN §6.4, §8).
var (
	rateLimitHeaders = map[string]*huma.Param{
		"X-RateLimit-Limit":     {Description: "Requests allowed per window (per client or key)", Schema: &huma.Schema{Type: "integer"}},
		"X-RateLimit-Remaining": {Description: "Requests left in the current window", Schema: &huma.Schema{Type: "integer"}},
		"X-RateLimit-Reset":     {Description: "Unix seconds when the limit resets", Schema: &huma.Schema{Type: "integer"}},
	}
	retryAfterHeader = &huma.Param{Description: "Seconds to wait before trying again (429, 503; 202: before polling)", Schema: &huma.Schema{Type: "integer"}}
	// deprecationHeaders are on every v1 response once v1 is deprecated (DESIGN §6.4).
	deprecationHeaders = map[string]*huma.Param{
		"Deprecation": {Description: "RFC 9745: @<unix seconds> when v1 was deprecated (only once it is)", Schema: &huma.Schema{Type: "string"}},
		"Sunset":      {Description: "RFC 8594: when v1 stops answering (only once it is deprecated)", Schema: &huma.Schema{Type: "string"}},
		"Link":        {Description: `The migration guide, rel="sunset" and rel="deprecation" (only once v1 is deprecated)`, Schema: &huma.Schema{Type: "string"}},
	}
	// gatewayRequestHeaders are on every answer about a gateway request: the gateway's answer,
	// the 202, a poll, a failed state.
	gatewayRequestHeaders = map[string]*huma.Param{
		"X-Request-Id":          {Description: "The gateway request's id (poll GET /requests/{id})", Schema: &huma.Schema{Type: "string", Format: "uuid"}},
		"X-Gateway-Id":          {Description: "Serial of the gateway that handled the request", Schema: &huma.Schema{Type: "string"}},
		"X-Request-Duration-Ms": {Description: "How long this HTTP exchange held the connection", Schema: &huma.Schema{Type: "integer"}},
		"X-Request-State": {Description: "The request's state", Schema: &huma.Schema{Type: "string",
			Enum: []any{"pending", "dispatched", "completed", "rejected", "dispatch_failed", "gateway_unresponsive"}}},
		"Preference-Applied": {Description: "RFC 7240: the Prefer values honoured (wait=N, respond-async)", Schema: &huma.Schema{Type: "string"}},
	}
	idempotentReplayedHeader = &huma.Param{Description: "true when this is the stored answer of an earlier request with the same Idempotency-Key",
		Schema: &huma.Schema{Type: "string", Enum: []any{"true"}}}
	truncatedHeader = &huma.Param{Description: "true when more log entries matched than limit allows (set by the gateway)",
		Schema: &huma.Schema{Type: "string", Enum: []any{"true"}}}
)

// Operation metadata the contract pass reads.
const (
	metaGatewayRequest = "lockernet-gateway-request" // a proxied operation or the poll
	metaTruncates      = "lockernet-truncates"       // may pass X-Response-Truncated through
)

// finishOpenAPI completes the document once every operation is registered.
func finishOpenAPI(oapi *huma.OpenAPI) {
	oapi.Servers = Servers
	for path, item := range oapi.Paths {
		for _, o := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if o == nil {
				continue
			}
			sf := surfaceOf(path)
			cloud := sf == surfaceCloud
			if d := o.Responses["default"]; d == nil || sf != surfaceProblem {
				// Every operation answers huma's own refusals (413, 415, 422) too, in its
				// surface's body; huma documents problem+json whatever the surface.
				o.Responses["default"] = surfaceDefault(oapi, sf)
			}
			for status, r := range o.Responses {
				if len(o.Security) > 0 || (sf == surfaceOAuth && o.Method == http.MethodPost) || o.OperationID == "sdk-login" {
					// Authenticated callers count against their limit; the token endpoint and
					// the SDK login (which shares its budget) count per client id.
					addHeaders(r, rateLimitHeaders)
				}
				if status == "default" || status == "202" || status == "429" || status == "503" {
					addHeader(r, "Retry-After", retryAfterHeader)
				}
				if !cloud {
					continue
				}
				addHeaders(r, deprecationHeaders)
				if o.Metadata[metaGatewayRequest] == true {
					addHeaders(r, gatewayRequestHeaders)
					if o.Method != http.MethodGet {
						addHeader(r, "Idempotent-Replayed", idempotentReplayedHeader)
					}
					if o.Metadata[metaTruncates] == true && strings.HasPrefix(status, "2") {
						addHeader(r, "X-Response-Truncated", truncatedHeader)
					}
				}
			}
		}
	}
}

// surfaceDefault is the default answer of a surface: its error body.
func surfaceDefault(oapi *huma.OpenAPI, sf surface) *huma.Response {
	reg := oapi.Components.Schemas
	switch sf {
	case surfaceOAuth:
		return &huma.Response{Description: "RFC 6749 error", Content: map[string]*huma.MediaType{
			"application/json": {Schema: reg.Schema(reflect.TypeFor[OAuthError](), true, "OAuthError")}}}
	case surfaceCloud:
		return &huma.Response{Description: "Error", Content: map[string]*huma.MediaType{
			"application/json": {Schema: reg.Schema(cloudErrorType, true, "")}}}
	}
	return &huma.Response{Description: "Error", Content: map[string]*huma.MediaType{
		"application/problem+json": {Schema: reg.Schema(reflect.TypeFor[huma.ErrorModel](), true, "")}}}
}

func addHeaders(r *huma.Response, hs map[string]*huma.Param) {
	for name, h := range hs {
		addHeader(r, name, h)
	}
}

// addHeader declares a header on a response unless the operation declares it already.
func addHeader(r *huma.Response, name string, h *huma.Param) {
	if r.Headers == nil {
		r.Headers = map[string]*huma.Param{}
	}
	for have := range r.Headers {
		if strings.EqualFold(have, name) {
			return
		}
	}
	r.Headers[name] = h
}
