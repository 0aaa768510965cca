package towersim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
)

// OpenRequest is the body of POST /sim/towers/{tower_id}/open.
type OpenRequest struct {
	Payload     string `json:"payload"`
	PayloadAuth string `json:"payload_auth"`
	// CloseWithItem says whether the door closes with an item inside. Absent: true for a
	// drop-off token, false for pickup and release.
	CloseWithItem *bool `json:"close_with_item,omitempty"`
	// AccessToken (scope tower_access), when set, is used for the upload instead of the
	// simulator's own client credentials.
	AccessToken string `json:"access_token,omitempty"`
}

// OpenResponse is the answer of POST /sim/towers/{tower_id}/open. A refusal is a normal
// answer: Opened false and Error the refusal code.
type OpenResponse struct {
	Opened           bool    `json:"opened"`
	LockerID         int64   `json:"lockerId"`
	EventsUploaded   int     `json:"eventsUploaded"`
	Error            *string `json:"error"`
	ErrorDescription string  `json:"errorDescription,omitempty"`
	UploadError      string  `json:"uploadError,omitempty"`
	EventsPending    int     `json:"eventsPending"`
	TokenType        string  `json:"tokenType,omitempty"`
	ItemInside       bool    `json:"itemInside"`
}

// SyncRequest is the optional body of POST /sim/towers/{tower_id}/sync.
type SyncRequest struct {
	AccessToken string `json:"access_token,omitempty"`
}

// SyncResponse is the answer of POST /sim/towers/{tower_id}/sync.
type SyncResponse struct {
	EventsUploaded int    `json:"eventsUploaded"`
	EventsPending  int    `json:"eventsPending"`
	UploadError    string `json:"uploadError,omitempty"`
}

// EventsResponse is the answer of GET /sim/towers/{tower_id}/events.
type EventsResponse struct {
	TowerID   string      `json:"towerId"`
	BootEpoch uint32      `json:"bootEpoch"`
	Events    []EventJSON `json:"events"`
}

// ErrorResponse is the body of every 4xx answer of the control API.
type ErrorResponse struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

const maxControlBody = 64 << 10

// Handler returns the dev-only control API:
//
//	POST /sim/towers/{tower_id}/open    present a token (OpenRequest → OpenResponse)
//	POST /sim/towers/{tower_id}/sync    upload queued events (SyncRequest → SyncResponse)
//	GET  /sim/towers                    every tower with its lockers ([]TowerStatus)
//	GET  /sim/towers/{tower_id}         one tower (TowerStatus)
//	GET  /sim/towers/{tower_id}/events  the event log with uploaded flags (EventsResponse)
//
// Tower ids are case-insensitive. Unknown towers answer 404, bad bodies 400, both with
// ErrorResponse.
func (s *Simulator) Handler() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route")
	})
	r.Route("/sim/towers", func(r chi.Router) {
		r.Get("/", s.handleList)
		r.Route("/{towerID}", func(r chi.Router) {
			r.Get("/", s.withTower(s.handleStatus))
			r.Post("/open", s.withTower(s.handleOpen))
			r.Post("/sync", s.withTower(s.handleSync))
			r.Get("/events", s.withTower(s.handleEvents))
		})
	})
	return logRequests(s.logger, r)
}

func (s *Simulator) withTower(h func(http.ResponseWriter, *http.Request, *Tower)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "towerID")
		t, ok := s.Tower(id)
		if !ok {
			writeError(w, http.StatusNotFound, "tower_not_found", fmt.Sprintf("no simulated tower %q", id))
			return
		}
		h(w, r, t)
	}
}

func (s *Simulator) handleList(w http.ResponseWriter, _ *http.Request) {
	out := make([]TowerStatus, 0, len(s.ids))
	for _, t := range s.Towers() {
		out = append(out, t.Status())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Simulator) handleStatus(w http.ResponseWriter, _ *http.Request, t *Tower) {
	writeJSON(w, http.StatusOK, t.Status())
}

func (s *Simulator) handleOpen(w http.ResponseWriter, r *http.Request, t *Tower) {
	var req OpenRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	if req.Payload == "" || req.PayloadAuth == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "payload and payload_auth are required")
		return
	}
	resp, err := s.Open(r.Context(), t.id, req)
	if err != nil {
		// Only a cancelled request gets here; the client is gone.
		writeError(w, http.StatusServiceUnavailable, "cancelled", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Simulator) handleSync(w http.ResponseWriter, r *http.Request, t *Tower) {
	var req SyncRequest
	if !readJSON(w, r, &req, true) {
		return
	}
	n, err := s.relay.Upload(r.Context(), t, req.AccessToken)
	resp := SyncResponse{EventsUploaded: n, EventsPending: t.Status().EventsPending}
	if err != nil {
		resp.UploadError = err.Error()
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Simulator) handleEvents(w http.ResponseWriter, _ *http.Request, t *Tower) {
	events := t.Events()
	out := EventsResponse{TowerID: t.id, BootEpoch: t.Status().BootEpoch, Events: make([]EventJSON, len(events))}
	for i, e := range events {
		out.Events[i] = e.JSON()
	}
	writeJSON(w, http.StatusOK, out)
}

// readJSON decodes one JSON object from the body (an empty body only when allowEmpty) and
// answers 400 itself when it cannot.
func readJSON(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) && allowEmpty {
		return true
	}
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON object")
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the body is over 64 KiB")
			return false
		}
		writeError(w, http.StatusBadRequest, "invalid_request", "read JSON body: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do then
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorResponse{Error: code, Message: msg})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func logRequests(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		logger.Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"durationMs", time.Since(start).Milliseconds())
	})
}
