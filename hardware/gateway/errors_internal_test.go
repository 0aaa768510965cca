package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// asAPIError is the local API's one error mapper: each error a handler returns, and the
// status, code, message and details its caller sees (DESIGN §7).
func TestAsAPIError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		err     error
		known   bool
		status  int
		code    string
		message string
		details map[string]any
	}{
		{name: "api error as is", err: newAPIError(CodeLockerNotFound, "no locker 7", nil),
			known: true, status: http.StatusNotFound, code: CodeLockerNotFound, message: "no locker 7", details: map[string]any{}},
		{name: "wrapped api error", err: fmt.Errorf("open locker: %w", newAPIError(CodeLockerOutOfService, "locker 3 is out of service", map[string]any{"lockerId": 3})),
			known: true, status: http.StatusConflict, code: CodeLockerOutOfService, message: "locker 3 is out of service", details: map[string]any{"lockerId": 3}},
		{name: "validation names the field", err: validationError("lockerTypeId", "must be a positive integer"),
			known: true, status: http.StatusUnprocessableEntity, code: CodeValidation, message: "lockerTypeId: must be a positive integer",
			details: map[string]any{"field": "lockerTypeId", "reason": "must be a positive integer"}},
		{name: "body too large", err: tooLarge(),
			known: true, status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge, message: "the request body is larger than 65536 bytes",
			details: map[string]any{"limit": maxBody}},
		{name: "unknown error is not echoed", err: errors.New("open /var/lib/gateway/state.db: permission denied"),
			known: false, status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", details: map[string]any{}},
		{name: "cancelled context is internal", err: context.Canceled,
			known: false, status: http.StatusInternalServerError, code: CodeInternal, message: "internal error", details: map[string]any{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ae, known := asAPIError(tc.err)
			assert.Equal(t, tc.known, known)
			assert.Equal(t, tc.status, ae.status())
			assert.Equal(t, tc.code, ae.code)
			assert.Equal(t, tc.message, ae.message)
			assert.Equal(t, tc.details, ae.details)
		})
	}
}

// TestCodeStatus is the local API's code → status table (DESIGN §7): every declared code has
// its one status, and a code the table lacks answers 500.
func TestCodeStatus(t *testing.T) {
	t.Parallel()
	cases := map[string]int{
		CodeAuthFailed:               http.StatusUnauthorized,
		CodeNotFound:                 http.StatusNotFound,
		CodeMethodNotAllowed:         http.StatusMethodNotAllowed,
		CodePayloadTooLarge:          http.StatusRequestEntityTooLarge,
		CodeInvalidJSON:              http.StatusBadRequest,
		CodeValidation:               http.StatusUnprocessableEntity,
		CodeTransactionNotFound:      http.StatusNotFound,
		CodeTransactionExists:        http.StatusConflict,
		CodeLockerNotFound:           http.StatusNotFound,
		CodeLockerTypeNotFound:       http.StatusNotFound,
		CodeBankTypeNotFound:         http.StatusNotFound,
		CodeNoAvailableLockers:       http.StatusNotFound,
		CodeLockerAssignmentConflict: http.StatusServiceUnavailable,
		CodeLockerOutOfService:       http.StatusConflict,
		CodeHardwareFault:            http.StatusInternalServerError,
		CodeControllerUnavailable:    http.StatusServiceUnavailable,
		CodeControllerError:          http.StatusInternalServerError,
		CodeInternal:                 http.StatusInternalServerError,
		CodeIdempotencyKeyReused:     http.StatusUnprocessableEntity,
		CodeRequestOutcomeUnknown:    http.StatusInternalServerError,
		"SOMETHING_NEW":              http.StatusInternalServerError,
	}
	assert.Len(t, codeStatus, len(cases)-1, "every declared code is in the table")
	for code, want := range cases {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, want, statusOf(code))
			assert.Equal(t, want, newAPIError(code, "m", nil).status())
		})
	}
}
