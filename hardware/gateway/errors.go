package gateway

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// Error codes of the local API (the "error" field of the Error body).
const (
	CodeAuthFailed               = "GATEWAY_AUTH_FAILED"
	CodeNotFound                 = "NOT_FOUND"
	CodeMethodNotAllowed         = "METHOD_NOT_ALLOWED"
	CodePayloadTooLarge          = "PAYLOAD_TOO_LARGE"
	CodeInvalidJSON              = "INVALID_JSON"
	CodeValidation               = "VALIDATION_ERROR"
	CodeTransactionNotFound      = "TRANSACTION_NOT_FOUND"
	CodeTransactionExists        = "TRANSACTION_EXISTS"
	CodeLockerNotFound           = "LOCKER_NOT_FOUND"
	CodeLockerTypeNotFound       = "LOCKER_TYPE_NOT_FOUND"
	CodeBankTypeNotFound         = "BANK_TYPE_NOT_FOUND"
	CodeNoAvailableLockers       = "NO_AVAILABLE_LOCKERS"
	CodeLockerAssignmentConflict = "LOCKER_ASSIGNMENT_CONFLICT"
	CodeLockerOutOfService       = "LOCKER_OUT_OF_SERVICE"
	CodeHardwareFault            = "HARDWARE_FAULT"
	CodeControllerUnavailable    = "CONTROLLER_UNAVAILABLE"
	CodeControllerError          = "CONTROLLER_ERROR"
	CodeInternal                 = "INTERNAL_ERROR"
	// CodeIdempotencyKeyReused: an Idempotency-Key sent again with another method, path or body.
	CodeIdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// CodeRequestOutcomeUnknown: a keyed request begun by an earlier run of the gateway that
	// stopped before it finished: whether it was carried out is not known.
	CodeRequestOutcomeUnknown = "REQUEST_OUTCOME_UNKNOWN"
	// CodeGatewayStopping: the request reached a gateway that is stopping; it was not carried
	// out.
	CodeGatewayStopping = "GATEWAY_STOPPING"
)

// maxBody is the largest request body the API reads (§8).
const maxBody = 64 << 10

// codeStatus is the local API's one mapping from an error code to its HTTP status: handlers
// name the code (newAPIError), never the status.
var codeStatus = map[string]int{
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
	CodeGatewayStopping:          http.StatusServiceUnavailable,
}

// statusOf is the HTTP status of an error code (500 for a code the table lacks).
func statusOf(code string) int {
	if st, ok := codeStatus[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// apiError is an error that knows its answer: its code decides the status (statusOf).
// Handlers return it; the one place that writes errors is writeError.
type apiError struct {
	code    string
	message string
	details map[string]any
	// body, when set, replaces the Error body (it must embed the Error fields).
	body any
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// status is the HTTP status the error answers with.
func (e *apiError) status() int { return statusOf(e.code) }

func newAPIError(code, message string, details map[string]any) *apiError {
	if details == nil {
		details = map[string]any{}
	}
	return &apiError{code: code, message: message, details: details}
}

func errorBody(code, message string, details map[string]any) ErrorBody {
	if details == nil {
		details = map[string]any{}
	}
	return ErrorBody{Error: code, Message: message, Timestamp: formatTime(time.Now()), Details: details}
}

func validationError(field, reason string) *apiError {
	return newAPIError(CodeValidation, field+": "+reason,
		map[string]any{"field": field, "reason": reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code, message string, details map[string]any) {
	writeJSON(w, statusOf(code), errorBody(code, message, details))
}

// asAPIError maps any handler error to its answer; unknown errors are 500
// INTERNAL_ERROR without their text (it may name files or queries).
func asAPIError(err error) (*apiError, bool) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae, true
	}
	return newAPIError(CodeInternal, "internal error", nil), false
}

// decodeJSON reads a JSON object body into v. An empty body is accepted when
// allowEmpty (v stays zero). Malformed JSON → 400 INVALID_JSON, wrong types or a
// string with a control character → 422 VALIDATION_ERROR naming the field, more
// than 64 KiB → 413.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	if r.ContentLength > maxBody {
		return tooLarge()
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge()
		}
		return newAPIError(CodeInvalidJSON, "cannot read the request body", nil)
	}
	trimmed := strings.TrimSpace(string(data))
	if trimmed == "" || trimmed == "null" {
		if allowEmpty {
			return nil
		}
		return newAPIError(CodeInvalidJSON, "a JSON object body is required", nil)
	}
	if trimmed[0] != '{' {
		return newAPIError(CodeValidation, "the body must be a JSON object",
			map[string]any{"field": "", "reason": "must be a JSON object"})
	}
	if field, ok := controlCharacterField(trimmed); ok {
		return validationError(field, "must not contain control characters")
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			return validationError(field, "must be "+jsonTypeName(te.Type.Kind().String()))
		}
		var fe *fieldError
		if errors.As(err, &fe) {
			return validationError(fe.field, fe.reason)
		}
		return newAPIError(CodeInvalidJSON, "the body is not valid JSON", nil)
	}
	if dec.More() {
		return newAPIError(CodeInvalidJSON, "the body has data after the JSON object", nil)
	}
	return nil
}

func tooLarge() *apiError {
	return newAPIError(CodePayloadTooLarge,
		fmt.Sprintf("the request body is larger than %d bytes", maxBody), map[string]any{"limit": maxBody})
}

func jsonTypeName(kind string) string {
	switch kind {
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "of another type"
}

// fieldError is returned by custom JSON decoders of single fields.
type fieldError struct{ field, reason string }

func (e *fieldError) Error() string { return e.field + ": " + e.reason }

// multilineFields are the free-text body fields that may hold line breaks and tabs;
// every other control character is refused in them too.
var multilineFields = map[string]bool{"reason": true}

// controlCharacterField names the first string in a JSON body (a value or a
// property name, at any depth) that holds a control character (C0, DEL, C1: NUL,
// escape sequences, line breaks outside free text): none is meaningful in an id,
// a kind or a status, and they end up in the gateway's database, its logs and
// the admin page. A body that is not valid JSON reports nothing (decodeJSON
// answers it).
func controlCharacterField(body string) (string, bool) {
	var doc any
	if json.Unmarshal([]byte(body), &doc) != nil {
		return "", false
	}
	return controlCharacterIn("", doc)
}

func controlCharacterIn(field string, v any) (string, bool) {
	switch v := v.(type) {
	case string:
		multiline := multilineFields[field]
		for _, r := range v {
			if unicode.IsControl(r) && !(multiline && (r == '\t' || r == '\n' || r == '\r')) {
				return cmp.Or(field, "body"), true
			}
		}
	case map[string]any:
		for k, e := range v {
			name := k
			if field != "" {
				name = field + "." + k
			}
			if _, bad := controlCharacterIn("", k); bad {
				return cmp.Or(field, "body"), true
			}
			if f, bad := controlCharacterIn(name, e); bad {
				return f, true
			}
		}
	case []any:
		for i, e := range v {
			if f, bad := controlCharacterIn(fmt.Sprintf("%s[%d]", field, i), e); bad {
				return f, true
			}
		}
	}
	return "", false
}
