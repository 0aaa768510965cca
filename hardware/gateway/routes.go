package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lockernet/lockernet/internal/telemetry"
)

// handlerFunc is the shape of every API handler: errors are written in one
// place (serve).
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) serve(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		ae, known := asAPIError(err)
		if !known {
			s.logger.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "err", err)
		}
		if ae.body != nil {
			writeJSON(w, ae.status(), ae.body)
			return
		}
		writeError(w, ae.code, ae.message, ae.details)
	}
}

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(telemetry.Middleware, s.observe, s.track, limitBody)

	// Unknown routes and methods answer 401 before 404/405, so a caller
	// without the secret learns nothing about the API.
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.requireBearer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, CodeNotFound, "no such operation", nil)
		})).ServeHTTP(w, r)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.requireBearer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, CodeMethodNotAllowed, "method not allowed on this path", nil)
		})).ServeHTTP(w, r)
	})

	// Probes: unauthenticated, tiny.
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)

	// Admin page: bearer or session cookie; its forms carry a CSRF token.
	r.Get("/", s.adminPage)
	r.Post("/login", s.adminLogin)
	r.Post("/logout", s.adminLogout)
	r.Post("/admin/lockers/{lockerId}/open", s.adminOpen)
	r.Post("/admin/lockers/{lockerId}/service", s.adminService)

	r.Group(func(r chi.Router) {
		r.Use(s.requireBearer, s.idempotent)
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))

		r.Get("/health", s.serve(s.health))

		r.Get("/transactions", s.serve(s.listTransactions))
		r.Post("/transactions", s.serve(s.createTransaction))
		r.Get("/transactions/{transactionId}", s.serve(s.getTransaction))
		r.Delete("/transactions/{transactionId}", s.serve(s.releaseTransaction))
		r.Post("/transactions/{transactionId}/open", s.serve(s.openTransaction))

		r.Get("/lockers", s.serve(s.listLockers))
		r.Get("/lockers/config", s.serve(s.lockerConfig))
		r.Post("/lockers/open-all", s.serve(s.openAll))
		r.Get("/lockers/{lockerId}", s.serve(s.getLocker))
		r.Patch("/lockers/{lockerId}", s.serve(s.patchLocker))
		r.Post("/lockers/{lockerId}/open", s.serve(s.openLocker))

		r.Get("/locker-types", s.serve(s.listLockerTypes))
		r.Get("/locker-types/{id}", s.serve(s.getLockerType))
		r.Get("/bank-types", s.serve(s.listBankTypes))
		r.Get("/bank-types/{id}", s.serve(s.getBankType))

		r.Post("/system/heartbeat", s.serve(s.heartbeat))
		r.Get("/system", s.serve(s.system))
		r.Get("/system/logs", s.serve(s.systemLogs))
		r.Get("/alerts", s.serve(s.listAlerts))

		r.Get("/openapi.json", s.serve(s.openAPIDocument))
	})
	return r
}

// limitBody answers 413 for a declared body over 64 KiB and caps undeclared
// (chunked) bodies at the same size.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBody {
			ae := tooLarge()
			writeError(w, ae.code, ae.message, ae.details)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.store.ping(r.Context()); err != nil {
		s.logger.WarnContext(r.Context(), "readiness check failed", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": "unreachable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
}

// rawPresent reports whether a JSON field was sent with a non-null value.
func rawPresent(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}
