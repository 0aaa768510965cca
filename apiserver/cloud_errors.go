package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/lockernet/lockernet/internal/store"
)

// CloudError is the gateway cloud API's error body (DESIGN §6).
type CloudError struct {
	status    int
	Code      string         `json:"error" doc:"Machine-readable code, e.g. RATE_LIMITED"`
	Message   string         `json:"message"`
	RequestID *string        `json:"requestId" doc:"The gateway request this error belongs to, if any"`
	Timestamp Timestamp      `json:"timestamp"`
	Details   map[string]any `json:"details"`
}

func (e *CloudError) Error() string  { return e.Code + ": " + e.Message }
func (e *CloudError) GetStatus() int { return e.status }

// ContentType keeps customer errors plain JSON.
func (e *CloudError) ContentType(string) string { return "application/json" }

var cloudCodes = map[int]string{
	http.StatusBadRequest:            "BAD_REQUEST",
	http.StatusUnauthorized:          "UNAUTHORIZED",
	http.StatusForbidden:             "FORBIDDEN",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusMethodNotAllowed:      "METHOD_NOT_ALLOWED",
	http.StatusConflict:              "CONFLICT",
	http.StatusRequestEntityTooLarge: "PAYLOAD_TOO_LARGE",
	http.StatusUnsupportedMediaType:  "UNSUPPORTED_MEDIA_TYPE",
	http.StatusUnprocessableEntity:   "VALIDATION_FAILED",
	http.StatusTooManyRequests:       "RATE_LIMITED",
	http.StatusInternalServerError:   "INTERNAL_ERROR",
	http.StatusServiceUnavailable:    "SERVICE_UNAVAILABLE",
}

// cloudError builds the surface's error body with a code of our own.
func cloudError(status int, code, msg string, details map[string]any) *CloudError {
	if details == nil {
		details = map[string]any{}
	}
	return &CloudError{status: status, Code: code, Message: msg, Timestamp: ts(time.Now()), Details: details}
}

// The gateway cloud API's own refusals (DESIGN §6); the shared ones are in errors.go.

// locationNotFoundError: no location of the key's organization with a gateway has this id.
type locationNotFoundError struct{ locationID int64 }

func (e *locationNotFoundError) Error() string {
	return fmt.Sprintf("no location with a gateway has id %d", e.locationID)
}

// errRequestNotFound: no gateway request of the key's organization has this id.
var errRequestNotFound = errors.New("no request with this id")

// idempotencyKeyReusedError: the Idempotency-Key was claimed by a request with another
// method, path or body.
type idempotencyKeyReusedError struct{ key string }

func (e *idempotencyKeyReusedError) Error() string { return "idempotency key reused: " + e.key }
func (e *idempotencyKeyReusedError) Unwrap() error { return store.ErrIdempotencyKeyReused }

// errBodyInvalid: a body that does not decode into the operation's input.
var errBodyInvalid = invalidInput("the request body is not valid")

// rateLimitedError: the key spent its requests of the window.
type rateLimitedError struct {
	limit             int
	retryAfterSeconds int64
}

func (e *rateLimitedError) Error() string { return "rate limited" }

// cloudFailure is the gateway cloud API's error mapper (DESIGN §6): its own body
// {error, message, requestId, timestamp, details} with a machine code. Unexpected errors
// are logged and answered 500 without their text.
func (s *Server) cloudFailure(ctx context.Context, op string, err error) error {
	var (
		ce      *CloudError
		missing *locationNotFoundError
		reused  *idempotencyKeyReusedError
		in      *inputError
		ua      *unauthenticatedError
		limited *rateLimitedError
		guessed *keyFailuresError
	)
	switch {
	case errors.As(err, &ce):
		return err
	case errors.As(err, &missing):
		return cloudError(http.StatusNotFound, "LOCATION_NOT_FOUND", "no location with a gateway has this id",
			map[string]any{"locationId": missing.locationID})
	case errors.Is(err, errRequestNotFound):
		return cloudError(http.StatusNotFound, "REQUEST_NOT_FOUND", errRequestNotFound.Error(), nil)
	case errors.As(err, &reused):
		return cloudError(http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED",
			"this Idempotency-Key was used for a request with another method, path or body", map[string]any{"idempotencyKey": reused.key})
	case errors.As(err, &in):
		return cloudError(http.StatusUnprocessableEntity, "VALIDATION_FAILED", in.msg, nil)
	case errors.As(err, &ua):
		return cloudError(http.StatusUnauthorized, "UNAUTHORIZED", ua.msg, nil)
	case errors.As(err, &limited):
		return huma.ErrorWithHeaders(cloudError(http.StatusTooManyRequests, "RATE_LIMITED", "the API key exceeded its rate limit",
			map[string]any{"limit": limited.limit, "windowSeconds": int(store.RateWindow.Seconds()), "retryAfterSeconds": limited.retryAfterSeconds}),
			http.Header{"Retry-After": {strconv.FormatInt(limited.retryAfterSeconds, 10)}})
	case errors.As(err, &guessed):
		return huma.ErrorWithHeaders(cloudError(http.StatusTooManyRequests, "RATE_LIMITED",
			"too many invalid API keys from this address: try again in "+strconv.FormatInt(guessed.retryAfterSeconds, 10)+" s",
			map[string]any{"retryAfterSeconds": guessed.retryAfterSeconds}),
			http.Header{"Retry-After": {strconv.FormatInt(guessed.retryAfterSeconds, 10)}})
	case errors.Is(err, errGatewaysBusy):
		return tryAgainShortly(cloudError(http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE",
			errGatewaysBusy.Error()+": try again shortly, or send Prefer: respond-async", nil))
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer (nginx's 499).
		return cloudError(499, "CLIENT_CLOSED_REQUEST", "client closed the request", nil)
	case errors.Is(err, errAuthUnavailable):
		s.logger.ErrorContext(ctx, "authorize gateway key", "err", err)
		return tryAgainShortly(cloudError(http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "try again shortly", nil))
	case errors.Is(err, store.ErrOverloaded):
		s.logger.WarnContext(ctx, "overloaded", "op", op, "err", err)
		return tryAgainShortly(cloudError(http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE",
			"the service is overloaded: try again shortly", nil))
	}
	s.logger.ErrorContext(ctx, "gateway cloud request failed", "op", op, "err", err)
	return cloudError(http.StatusInternalServerError, "INTERNAL_ERROR", "internal error", nil)
}

// writeCloudFailure writes a refusal from a middleware (handlers return the error).
func (s *Server) writeCloudFailure(ctx huma.Context, op string, err error) {
	mapped := s.cloudFailure(ctx.Context(), op, err)
	var he huma.HeadersError
	if errors.As(mapped, &he) {
		for k, vs := range he.GetHeaders() {
			for _, v := range vs {
				ctx.SetHeader(k, v)
			}
		}
	}
	var ce *CloudError
	errors.As(mapped, &ce)
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(ce.status)
	_ = json.NewEncoder(ctx.BodyWriter()).Encode(ce)
}
