package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
)

// observe assigns the request id, recovers panics into 500 INTERNAL_ERROR, and
// writes one log line and one latency observation per request. It never logs
// headers (the secret travels in one).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		reqID := r.Header.Get("X-Request-Id")
		if !validRequestID(reqID) {
			reqID = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", reqID)
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.logger.ErrorContext(r.Context(), "handler panic", "requestId", reqID, "panic", p)
				if ww.Status() == 0 {
					writeError(ww, CodeInternal, "internal error", nil)
				}
			}
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			}
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			d := time.Since(start)
			s.metrics.requestDuration.WithLabelValues(route, r.Method, strconv.Itoa(status)).Observe(d.Seconds())
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelWarn
			}
			s.logger.LogAttrs(r.Context(), level, "request",
				slog.String("requestId", reqID),
				slog.String("method", r.Method),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Int64("durationMs", d.Milliseconds()),
				slog.Int("bytes", ww.BytesWritten()),
			)
		}()
		next.ServeHTTP(ww, r)
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// secretMatches compares in constant time, also in the secret's length.
func (s *Server) secretMatches(given string) bool {
	a := sha256.Sum256([]byte(given))
	b := sha256.Sum256([]byte(s.cfg.Secret))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// bearerOK reports whether the request carries the gateway's bearer secret.
func (s *Server) bearerOK(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return s.secretMatches(strings.TrimSpace(token))
}

// requireBearer answers 401 GATEWAY_AUTH_FAILED without the bearer secret.
func (s *Server) requireBearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.bearerOK(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gateway"`)
			msg := "missing bearer secret"
			if r.Header.Get("Authorization") != "" {
				msg = "wrong bearer secret"
			}
			writeError(w, CodeAuthFailed, msg, nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}
