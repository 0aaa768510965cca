package apiserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/lockernet/lockernet/internal/gatewayexec"
	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/store"
)

// The gateway cloud API's answers about a gateway request (DESIGN §6.2, §6.4): the
// gateway's response verbatim, the error body of a failed state, or the pending request.

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
	CompletedAt *Timestamp `json:"completedAt" nullable:"true"`
	Attempts    int        `json:"attempts" doc:"Sends to the gateway so far"`
	// LastError and NextAttemptAt come from the request's workflow (a poll asks its query):
	// absent when the poll answered from the stored request, or when there is nothing to say.
	LastError     string     `json:"lastError,omitempty" doc:"Why the last send did not settle the request (a poll, while its workflow reports it)"`
	NextAttemptAt *Timestamp `json:"nextAttemptAt,omitempty" doc:"When the next send goes out, while the workflow waits to re-send (a poll)"`
}

// answerRequest answers a request after its wait: its outcome once terminal (within the
// wait, so respond-async was not applied to it), else the pending request (pendingStatus:
// 202 for a new request, 200 for a poll).
func (s *Server) answerRequest(row gatewayexec.LiveRequest, prefs preferences, replay bool, pendingStatus int) *huma.StreamResponse {
	if row.Terminal() {
		return s.answerStored(row.GatewayRequest, replay, syncApplied(prefs.applied))
	}
	return s.answerPending(row, replay, prefs.applied, pendingStatus)
}

// answerStored writes a terminal request's outcome: completed is the gateway's status and
// body verbatim; the other states are their own status with the surface's error body,
// stamped with the completion time so every replay is byte-identical.
func (s *Server) answerStored(row store.GatewayRequest, replay bool, applied []string) *huma.StreamResponse {
	o := row.Outcome
	s.cloud.responses.WithLabelValues(row.Class, o.Status).Inc()
	status, body, contentType := o.HTTPStatus, o.Body, o.Headers["Content-Type"]
	if o.Status != gatewayreq.StateCompleted {
		id := row.ID.String()
		details := o.Details
		if details == nil {
			details = map[string]any{}
		}
		e := &CloudError{status: status, Code: o.ErrorCode, Message: o.ErrorMessage, RequestID: &id,
			Timestamp: ts(*row.CompletedAt), Details: details}
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

// answerPending writes the PendingRequest from the request as known (the stored row, or
// the workflow's query for a poll): 202 with Location and Retry-After for a new request (or
// its replay), 200 for a poll.
func (s *Server) answerPending(row gatewayexec.LiveRequest, replay bool, applied []string, status int) *huma.StreamResponse {
	p := PendingRequest{
		ID: row.ID.String(), Status: row.Status, Kind: row.Kind, Method: row.Method, Path: row.Path,
		LocationID: row.LocationID, GatewayID: row.GatewaySerial, CreatedAt: ts(row.CreatedAt), UpdatedAt: ts(row.UpdatedAt),
		Attempts: row.Attempts, LastError: row.LastError,
	}
	p.NextAttemptAt = optTS(row.NextAttemptAt)
	s.cloud.responses.WithLabelValues(row.Class, "pending").Inc()
	b, _ := json.Marshal(p)
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		s.requestHeaders(hctx, row.GatewayRequest, p.Status, replay, applied)
		if status == http.StatusAccepted {
			hctx.SetHeader("Location", cloudPrefix+"/requests/"+p.ID)
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
