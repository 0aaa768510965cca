package telemetry

import (
	"context"
	"log/slog"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// PgxTracer is the pgx tracer for a pool's ConnConfig.Tracer: a client span per statement,
// batch, COPY and pool acquire, each under the span of the request or activity that ran it
// (statements of background loops, with no span in their context, make none). Nil when
// tracing is off, so an untraced pool runs no tracer at all.
func PgxTracer() pgx.QueryTracer {
	if !enabled.Load() {
		return nil
	}
	return otelpgx.NewTracer() // spans named after the statement's operation (SELECT, INSERT ...)
}

// TemporalInterceptors are the Temporal client interceptors that trace workflow starts,
// signals and queries, and — on the workers made from that client — workflow runs and
// activity runs, carrying the span context in the Temporal headers. Empty when off.
func TemporalInterceptors() ([]interceptor.ClientInterceptor, error) {
	if !enabled.Load() {
		return nil, nil
	}
	// The global propagator, so baggage and traceparent travel the same way through
	// Temporal as over HTTP.
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{TextMapPropagator: Propagator()})
	if err != nil {
		return nil, err
	}
	return []interceptor.ClientInterceptor{i}, nil
}

// LogHandler adds trace_id and span_id to every record logged with a context that carries
// a span, so the log lines of one request are found from its trace and the other way round.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
