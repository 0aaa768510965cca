package gateway

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (s *Server) uptime() int64 { return int64(time.Since(s.started).Seconds()) }

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	h := Health{Status: "ok", UptimeSeconds: s.uptime()}
	for _, c := range s.controllerViews(r.Context()) {
		h.Controllers = append(h.Controllers, ControllerHealth{ID: c.ID, Online: c.Online})
		if !c.Online {
			h.Status = "degraded"
		}
	}
	if err := s.store.ping(r.Context()); err != nil {
		s.logger.WarnContext(r.Context(), "health: database", "err", err)
		h.Status = "degraded"
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

func (s *Server) system(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, System{
		GatewayID:     s.cfg.GatewayID,
		Version:       s.cfg.Version,
		UptimeSeconds: s.uptime(),
		Hostname:      s.hostname,
		Time:          formatTime(time.Now()),
		Controllers:   s.controllerViews(r.Context()),
	})
	return nil
}

// Bounds of GET /system/logs?limit=.
const (
	defaultLogLimit = 100
	maxLogLimit     = 1000
)

func (s *Server) systemLogs(w http.ResponseWriter, r *http.Request) error {
	limit := defaultLogLimit
	if raw := r.URL.Query().Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxLogLimit {
			return validationError("limit", "must be an integer from 1 to "+strconv.Itoa(maxLogLimit))
		}
		limit = n
	}
	entries, truncated, err := s.store.logs(r.Context(), limit)
	if err != nil {
		return err
	}
	out := make([]LogEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, LogEntry{Timestamp: formatTime(e.Timestamp), Level: e.Level, Message: e.Message, Fields: e.Fields})
	}
	if truncated {
		w.Header().Set("X-Response-Truncated", "true")
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	var body DeviceHeartbeatRequest
	if err := decodeJSON(w, r, &body, false); err != nil {
		return err
	}
	hb := heartbeat{DeviceID: body.DeviceID, Kind: body.Kind, Status: body.Status}
	// All four fields are required (null reads as empty): a heartbeat that says nothing about
	// what reported or how it is would only hide the next real one.
	switch {
	case strings.TrimSpace(body.DeviceID) == "":
		return validationError("deviceId", "is required")
	case len(body.DeviceID) > 128:
		return validationError("deviceId", "must be at most 128 characters")
	case strings.TrimSpace(body.Kind) == "":
		return validationError("kind", "is required")
	case len(body.Kind) > 64:
		return validationError("kind", "must be at most 64 characters")
	case strings.TrimSpace(body.Status) == "":
		return validationError("status", "is required")
	case len(body.Status) > 64:
		return validationError("status", "must be at most 64 characters")
	case body.Timestamp == "":
		return validationError("timestamp", "is required")
	}
	t, err := time.Parse(time.RFC3339Nano, body.Timestamp)
	if err != nil {
		return validationError("timestamp", "must be an RFC 3339 timestamp")
	}
	hb.DeviceTime = &t
	previous, err := s.store.recordHeartbeat(r.Context(), hb, time.Now())
	if err != nil {
		return err
	}
	if previous != hb.Status {
		msg := "device status changed"
		if previous == "" {
			msg = "device first seen"
		}
		s.event(r.Context(), slog.LevelInfo, msg, map[string]any{
			"deviceId": hb.DeviceID, "kind": hb.Kind, "status": hb.Status, "previousStatus": previous,
		})
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
