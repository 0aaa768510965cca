package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/httpserve"
	"github.com/lockernet/lockernet/internal/store"
)

// Error bodies differ by surface (DESIGN §3, §4, §6): the token service answers RFC 6749
// errors, the gateway cloud API its own {error, message, requestId, timestamp, details},
// everything else RFC 9457 problem+json. huma's error constructor is global, so the choice
// is made here, by path, once.

const cloudPrefix = "/api/customer/v1"

type surface int

const (
	surfaceProblem surface = iota
	surfaceOAuth
	surfaceCloud
)

func surfaceOf(path string) surface {
	switch {
	case path == cloudPrefix || strings.HasPrefix(path, cloudPrefix+"/"):
		return surfaceCloud
	case strings.HasPrefix(path, "/oauth/") || strings.HasPrefix(path, "/realms/"):
		return surfaceOAuth
	}
	return surfaceProblem
}

// newError builds the error body of the surface the path belongs to.
func newError(path string, status int, msg string, errs ...error) huma.StatusError {
	switch surfaceOf(path) {
	case surfaceOAuth:
		code, ok := oauthCodes[status]
		if !ok {
			code = "invalid_request"
		}
		return &OAuthError{status: status, Code: code, ErrorDescription: joinDetails(msg, errs)}
	case surfaceCloud:
		code, ok := cloudCodes[status]
		if !ok {
			code = strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
		}
		details := map[string]any{}
		if len(errs) > 0 {
			list := make([]string, 0, len(errs))
			for _, e := range errs {
				if e != nil {
					list = append(list, e.Error())
				}
			}
			details["errors"] = list
		}
		return &CloudError{status: status, Code: code, Message: msg, Timestamp: ts(time.Now()), Details: details}
	}
	for _, e := range errs {
		var d *huma.ErrorDetail
		if errors.As(e, &d) {
			d.Value = jsonSafe(d.Value)
		}
	}
	return huma.NewError(status, msg, errs...)
}

// jsonSafe keeps an echoed input value encodable: JSON has no NaN or Inf, and a value that
// cannot be encoded would turn the error body into "error marshaling response".
func jsonSafe(v any) any {
	switch f := v.(type) {
	case float64:
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	case float32:
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return strconv.FormatFloat(float64(f), 'g', -1, 32)
		}
	}
	return v
}

func joinDetails(msg string, errs []error) string {
	parts := []string{msg}
	for _, e := range errs {
		if e != nil {
			parts = append(parts, e.Error())
		}
	}
	return strings.Join(parts, ": ")
}

var installErrorsOnce sync.Once

// installErrorConstructor routes huma's errors (validation, 413, handler errors) through
// newError. It runs once per process; the choice depends only on the request path.
func installErrorConstructor() {
	installErrorsOnce.Do(func() {
		huma.NewErrorWithContext = func(ctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
			path := ""
			if ctx != nil {
				path = ctx.URL().Path
			}
			return newError(path, status, msg, errs...)
		}
	})
}

// writeRouterError answers requests no operation matched (404, 405) in the surface's format.
func writeRouterError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	e := newError(r.URL.Path, status, msg)
	ct := "application/problem+json"
	if f, ok := e.(huma.ContentTypeFilter); ok {
		ct = f.ContentType(ct)
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_ = jsonEncode(w, e)
}

// Domain errors: what went wrong, in the service's words. Handlers return these (or the
// store's errors) and never choose an HTTP status; each surface's mapper decides what its
// callers see: towerError (tower_errors.go), appError (app_errors.go), sdkError
// (sdk_errors.go), tokenFailure (token_errors.go) and cloudFailure (cloud_errors.go).

// notFoundError: what the request names does not exist, or not for this caller.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func errNotFound(msg string) error { return &notFoundError{msg: msg} }

// conflictError: what the request names is in a state that refuses the request.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }

func errConflict(msg string) error { return &conflictError{msg: msg} }

// forbiddenError: the caller is known but may not do this.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }

func errForbidden(msg string) error { return &forbiddenError{msg: msg} }

// unauthenticatedError: the caller's credentials are missing or not valid.
type unauthenticatedError struct{ msg string }

func (e *unauthenticatedError) Error() string { return e.msg }

func errUnauthenticated(msg string) error { return &unauthenticatedError{msg: msg} }

// inputError is input that huma's schema validation let through and the operation refuses
// (what a value means, not its shape). field says where ("body.expiry", "query.cursor");
// empty when msg names it. value is echoed back; reason says what was expected.
type inputError struct {
	msg    string
	field  string
	value  any
	reason string
}

func (e *inputError) Error() string { return e.msg }

// invalidInput is an inputError whose message names the field.
func invalidInput(msg string) error { return &inputError{msg: msg} }

// invalidField is an inputError about one field.
func invalidField(msg, field string, value any, reason string) error {
	return &inputError{msg: msg, field: field, value: value, reason: reason}
}

// attemptsLimitedError: too many requests or failed attempts within a window (a caller's rate
// limit, wrong API keys from an address, access codes at a location, pickup_code filters of a
// key); retryAfter is in seconds.
type attemptsLimitedError struct {
	msg        string
	retryAfter int
}

func (e *attemptsLimitedError) Error() string { return e.msg }

// errAuthUnavailable: the caller's credentials could not be checked now (Postgres did not
// answer); the caller is to try again shortly.
var errAuthUnavailable = errors.New("the credentials cannot be checked now")

// errGatewaysBusy: the instance already holds as many requests waiting for a gateway's
// answer as it may (gatewayexec.Executor.HoldWaiter).
var errGatewaysBusy = errors.New("too many requests are waiting for gateways on this instance")

// problem maps the errors every problem+json surface (tower, app engine, mobile SDK)
// shares, store sentinels included. Unexpected errors are logged and never echoed.
func (s *Server) problem(ctx context.Context, op string, err error) error {
	var (
		se       huma.StatusError
		conflict *store.StatusConflictError
		in       *inputError
		nf       *notFoundError
		cf       *conflictError
		fb       *forbiddenError
		ua       *unauthenticatedError
		limited  *attemptsLimitedError
		policy   *store.PolicyError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return err
	case errors.As(err, &in):
		if in.field == "" {
			return huma.Error422UnprocessableEntity(in.msg)
		}
		return huma.Error422UnprocessableEntity(in.msg, &huma.ErrorDetail{Location: in.field, Value: in.value, Message: in.reason})
	case errors.As(err, &policy):
		return huma.Error422UnprocessableEntity("invalid pickup policy: "+policy.Error(),
			&huma.ErrorDetail{Location: "body." + policy.Field, Message: policy.Msg})
	case errors.As(err, &nf):
		return huma.Error404NotFound(nf.msg)
	case errors.As(err, &cf):
		return huma.Error409Conflict(cf.msg)
	case errors.As(err, &fb):
		return huma.Error403Forbidden(fb.msg)
	case errors.As(err, &ua):
		return huma.Error401Unauthorized(ua.msg)
	case errors.As(err, &limited):
		return huma.ErrorWithHeaders(huma.Error429TooManyRequests(limited.msg),
			http.Header{"Retry-After": {strconv.Itoa(limited.retryAfter)}})
	case errors.Is(err, errAuthUnavailable):
		return tryAgainShortly(huma.Error503ServiceUnavailable("try again later"))
	case errors.As(err, &conflict):
		return huma.Error409Conflict(conflict.Msg)
	case errors.Is(err, store.ErrNotFound):
		return huma.Error404NotFound(fmt.Sprintf("%s: not found", op))
	case errors.Is(err, store.ErrConflict):
		return huma.Error409Conflict(fmt.Sprintf("%s: conflict", op))
	case errors.Is(err, store.ErrOverloaded):
		s.logger.WarnContext(ctx, "overloaded", slog.String("op", op), slog.Any("err", err))
		return overloaded()
	case errors.Is(err, store.ErrInvalidInput):
		return huma.Error422UnprocessableEntity(fmt.Sprintf("%s: text with a NUL character or bytes that are not UTF-8", op))
	case errors.Is(err, context.Canceled):
		return huma.NewError(499, "client closed the request")
	}
	s.logger.ErrorContext(ctx, "request failed", slog.String("op", op), slog.Any("err", err))
	return huma.Error500InternalServerError("internal error")
}

// overloaded is the answer when Postgres (or another dependency) has no room right now.
func overloaded() error {
	return tryAgainShortly(huma.Error503ServiceUnavailable("the service is overloaded: try again shortly"))
}

// tryAgainShortly is every surface's answer when the service cannot serve a request now but
// will in a moment (overloaded, a credential that cannot be checked, no room for one more
// waiting request): its 503 body e, with Retry-After: 1 so clients back off and come back
// (DESIGN §8).
func tryAgainShortly(e huma.StatusError) error {
	return huma.ErrorWithHeaders(e, http.Header{"Retry-After": {"1"}})
}

// writeRefusal writes a refusal decided in a middleware (handlers return theirs): mapped is
// what the surface's error mapper made of it, written as huma writes a handler's error (its
// headers, the negotiated content type, the status and body the mapper chose).
func writeRefusal(api huma.API, ctx huma.Context, mapped error) {
	var he huma.HeadersError
	if errors.As(mapped, &he) {
		for k, vs := range he.GetHeaders() {
			for _, v := range vs {
				ctx.SetHeader(k, v)
			}
		}
	}
	var se huma.StatusError
	if !errors.As(mapped, &se) {
		se = huma.NewErrorWithContext(ctx, http.StatusInternalServerError, "internal error")
	}
	status := se.GetStatus()
	var body any = se
	ct, err := api.Negotiate(ctx.Header("Accept"))
	if err != nil {
		// As huma answers a client that accepts none of its formats.
		status, ct = http.StatusNotAcceptable, "application/json"
		body = huma.NewErrorWithContext(ctx, status, "unable to marshal response", err)
	}
	if f, ok := body.(huma.ContentTypeFilter); ok {
		ct = f.ContentType(ct)
	}
	ctx.SetHeader("Content-Type", ct)
	out, err := api.Transform(ctx, strconv.Itoa(status), body)
	if err != nil {
		out = body
	}
	ctx.SetStatus(status)
	_ = api.Marshal(ctx.BodyWriter(), ct, out)
}

// Starting is what the apiserver answers while it is starting (migrations, the Temporal
// connection): 503 {"status":"starting"} on /healthz and /readyz, and 503 + Retry-After in
// the surface's error body on every other path. cmd/apiserver serves it through an
// httpserve.Latch until the real handler is ready.
func Starting() http.Handler {
	return httpserve.StartingProbes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		writeRouterError(w, r, http.StatusServiceUnavailable, "the service is starting; retry shortly")
	}))
}
