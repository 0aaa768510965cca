package telemetry

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// untraced are the probe and scrape paths: a span per health check or scrape would bury
// the requests worth reading.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Middleware is a chi middleware that gives each request a server span (continuing the
// caller's W3C traceparent) named after its route pattern once chi has routed it, so
// "POST /api/customer/v1/locations/{id}/lockers/{lockerId}/open" is one span name whatever
// the ids. Put it first, so the request log line and everything the handler does carry the
// span. Off, it only checks Enabled.
func Middleware(next http.Handler) http.Handler {
	routed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if rc := chi.RouteContext(r.Context()); rc != nil {
			if route := rc.RoutePattern(); route != "" {
				span := trace.SpanFromContext(r.Context())
				span.SetName(r.Method + " " + route)
				span.SetAttributes(attribute.String("http.route", route))
			}
		}
	})
	traced := otelhttp.NewHandler(routed, "http.server",
		// otelhttp renames the span at its end when the router set r.Pattern (chi does).
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Method + " " + r.Pattern
			}
			return r.Method
		}),
		otelhttp.WithFilter(func(r *http.Request) bool { return !untraced[r.URL.Path] }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !enabled.Load() {
			next.ServeHTTP(w, r)
			return
		}
		traced.ServeHTTP(w, r)
	})
}

// Transport wraps an HTTP client transport so each call gets a client span named
// "<peer> <method>" and carries traceparent to the server, when the caller is inside a
// trace. It decides per request, so a
// transport built before Setup (a package-level client) traces once Setup has run.
func Transport(base http.RoundTripper, peer string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, traced: otelhttp.NewTransport(base,
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return peer + " " + r.Method }))}
}

type transport struct {
	base   http.RoundTripper
	traced http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	// Calls outside any trace (the gateway sync's health checks) start none of their own.
	if !enabled.Load() || !trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.base.RoundTrip(r)
	}
	return t.traced.RoundTrip(r)
}
