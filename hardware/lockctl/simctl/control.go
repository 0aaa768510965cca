package simctl

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
)

const maxControlBody = 64 << 10

// ControlHandler serves the dev-only simulator API (mount it on its own address,
// never on the local API's):
//
//	POST   /sim/faults                   {"mode", "delayMs", "failures", "controllerId"} → 200 the setting; bad input → 400
//	GET    /sim/faults                   → the current setting
//	GET    /sim/stats                    → {"opens": {"<lockerId>": n}, "requests": n}
//	DELETE /sim/stats                    → 204, counters zeroed
//	GET    /sim/doors                    → {"<lockerId>": {"open": bool, "itemInside": bool}}
//	POST   /sim/lockers/{lockerId}/close {"itemInside": bool} → 200 {"lockerId", "doorOpen": false, "itemInside"}
//	POST   /sim/lockers/{lockerId}/force-open → 200 {"lockerId", "doorOpen": true}: the door opened by hand, no pulse
//
// A door left open is one opened and not closed (DoorCloseAfter zero, or before it); an item
// left is a door closed with itemInside; an absent controller is the controller_unreachable mode.
func (s *Sim) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sim/faults", s.handleSetFaults)
	mux.HandleFunc("GET /sim/faults", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, s.Stats())
	})
	mux.HandleFunc("DELETE /sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetStats()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /sim/doors", s.handleDoors)
	mux.HandleFunc("POST /sim/lockers/{lockerId}/close", s.handleCloseDoor)
	mux.HandleFunc("POST /sim/lockers/{lockerId}/force-open", s.handleForceOpen)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such simulator operation", nil)
	})
	return mux
}

func (s *Sim) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if !DecodeBody(w, r, &f) {
		return
	}
	if err := s.SetFaults(f); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_FAULTS", err.Error(), nil)
		return
	}
	WriteJSON(w, http.StatusOK, s.Faults())
}

type doorJSON struct {
	Open       bool `json:"open"`
	ItemInside bool `json:"itemInside"`
}

func (s *Sim) handleDoors(w http.ResponseWriter, _ *http.Request) {
	out := make(map[string]doorJSON, len(s.lockers))
	for id := range s.lockers {
		d, _ := s.Door(id)
		out[strconv.Itoa(id)] = doorJSON{Open: d.Open, ItemInside: d.ItemInside}
	}
	WriteJSON(w, http.StatusOK, out)
}

func (s *Sim) handleCloseDoor(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("lockerId"))
	if err != nil {
		writeError(w, http.StatusNotFound, "LOCKER_NOT_FOUND", "no such locker", nil)
		return
	}
	var body struct {
		ItemInside bool `json:"itemInside"`
	}
	if !DecodeBody(w, r, &body) {
		return
	}
	if !s.CloseDoor(id, body.ItemInside) {
		writeError(w, http.StatusNotFound, "LOCKER_NOT_FOUND", "no such locker", nil)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"lockerId": id, "doorOpen": false, "itemInside": body.ItemInside})
}

func (s *Sim) handleForceOpen(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("lockerId"))
	if err != nil || !s.ForceOpen(id) {
		writeError(w, http.StatusNotFound, "LOCKER_NOT_FOUND", "no such locker", nil)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"lockerId": id, "doorOpen": true})
}

// DecodeBody reads the optional JSON object body of a /sim/* request (64 KiB at
// most); an empty body leaves v as is. When it returns false it has answered the
// request with an error.
func DecodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "body larger than 64 KiB", nil)
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "INVALID_BODY", "cannot read body", nil)
		return false
	case len(data) == 0:
		return true
	}
	if err := json.Unmarshal(data, v); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_JSON", "body is not the expected JSON object: "+err.Error(), nil)
		return false
	}
	return true
}

// WriteJSON answers a /sim/* request with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
