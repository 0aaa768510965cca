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
	// AccessToken (scope tower_access), when set, is used for the cloud calls instead of the
	// simulator's own client credentials.
	AccessToken string `json:"access_token,omitempty"`
	// Claim is the session's claim (DESIGN §4.8); absent: developer.
	Claim string `json:"claim,omitempty"`
	// Offline: the phone has no network; it uses the session it cached earlier, syncs
	// nothing and leaves the events queued at the tower.
	Offline bool `json:"offline,omitempty"`
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
	Claim            string  `json:"claim,omitempty"`
	CommandsApplied  int     `json:"commandsApplied"`
	SyncError        string  `json:"syncError,omitempty"`
	Detail           string  `json:"detail,omitempty"`
}

// SyncRequest is the optional body of POST /sim/towers/{tower_id}/sync.
type SyncRequest struct {
	AccessToken string `json:"access_token,omitempty"`
}

// SyncResponse is the answer of POST /sim/towers/{tower_id}/sync.
type SyncResponse struct {
	EventsUploaded  int    `json:"eventsUploaded"`
	EventsPending   int    `json:"eventsPending"`
	CommandsApplied int    `json:"commandsApplied"`
	UploadError     string `json:"uploadError,omitempty"`
}

// ResetEventsRequest is the body of POST /sim/towers/{tower_id}/reset-events.
type ResetEventsRequest struct {
	Reason      string `json:"reason"`
	Claim       string `json:"claim,omitempty"`
	AccessToken string `json:"access_token,omitempty"`
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
//	POST /sim/towers/{tower_id}/sync    sync: events up, commands down (SyncRequest → SyncResponse)
//	POST /sim/towers/{tower_id}/reset-events  reset the event log and report it (ResetEventsRequest → TowerStatus)
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
			r.Post("/reset-events", s.withTower(s.handleResetEvents))
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
	if errors.Is(err, ErrUnknownClaim) {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if err != nil {
		// A cancelled request (the client is gone) or a broken link.
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Simulator) handleSync(w http.ResponseWriter, r *http.Request, t *Tower) {
	var req SyncRequest
	if !readJSON(w, r, &req, true) {
		return
	}
	n, applied, err := s.SyncTower(r.Context(), t.id, req.AccessToken)
	resp := SyncResponse{EventsUploaded: n, CommandsApplied: applied, EventsPending: t.Status().EventsPending}
	if err != nil {
		resp.UploadError = err.Error()
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Simulator) handleResetEvents(w http.ResponseWriter, r *http.Request, t *Tower) {
	var req ResetEventsRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	if req.Claim == "" {
		req.Claim = DefaultClaim
	}
	if err := s.ResetEvents(r.Context(), t.id, req.Claim, req.Reason, req.AccessToken); err != nil {
		status := http.StatusBadGateway
		if RefusalCode(err) != "" {
			status = http.StatusForbidden
		}
		writeError(w, status, "reset_failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, t.Status())
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
