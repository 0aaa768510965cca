// Package telemetry wires OpenTelemetry tracing into the service processes: one trace per
// API request through the apiserver, the workflow start, the workflow and its activities,
// the Postgres statements and the gateway's local API (W3C traceparent between processes).
//
// It is configured by the standard OTEL_* environment variables and is off unless an OTLP
// endpoint is set:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  where spans go; neither set: tracing is off
//	OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL  http/protobuf (default) or grpc
//	OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _INSECURE, _CERTIFICATE ...  read by the exporter
//	OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none                 tracing off whatever the endpoint
//	OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG                      the sampler [parentbased_always_on]
//	OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES                       the resource [service.name lockernet-<process>]
//	OTEL_BSP_*                                                        the batch span processor's queue and delays
//
// Off, the hooks in the other packages cost an atomic load per request (HTTP) or nothing
// at all (Postgres and Temporal get no tracer), so an untraced deployment pays nothing
// measurable. On, the global tracer provider and the W3C tracecontext + baggage
// propagator are set; every hook reads them.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// enabled is set by Setup when spans are exported; the hooks read it.
var enabled atomic.Bool

// Enabled reports whether tracing is on in this process.
func Enabled() bool { return enabled.Load() }

// Settings is what the OTEL_* environment asks for.
type Settings struct {
	// On is false when no endpoint is set or the SDK is disabled.
	On bool
	// Protocol is "http/protobuf" or "grpc".
	Protocol string
	// Why tells an operator why tracing is off (empty when on).
	Why string
}

// ReadSettings reads the OTEL_* variables that decide whether and how spans are exported.
func ReadSettings(getenv func(string) string) (Settings, error) {
	if v := getenv("OTEL_SDK_DISABLED"); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return Settings{}, fmt.Errorf("parse OTEL_SDK_DISABLED: %w", err)
		}
		if off {
			return Settings{Why: "OTEL_SDK_DISABLED=true"}, nil
		}
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return Settings{Why: "OTEL_TRACES_EXPORTER=none"}, nil
	default:
		return Settings{}, fmt.Errorf("parse OTEL_TRACES_EXPORTER: %q is not supported (otlp or none)", exp)
	}
	if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return Settings{Why: "no OTEL_EXPORTER_OTLP_ENDPOINT"}, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "":
		proto = "http/protobuf"
	case "http/protobuf", "grpc":
	default:
		return Settings{}, fmt.Errorf("parse OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported (http/protobuf or grpc)", proto)
	}
	return Settings{On: true, Protocol: proto}, nil
}

// Setup starts tracing for the process named service (service.name
// lockernet-<service> unless OTEL_SERVICE_NAME says otherwise) when the environment asks
// for it. Call it before building servers, clients and pools, and call the returned
// shutdown on the way out: it flushes the spans still queued.
func Setup(ctx context.Context, service string, logger *slog.Logger) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	s, err := ReadSettings(os.Getenv)
	if err != nil {
		return noop, err
	}
	if !s.On {
		logger.Debug("tracing off", "reason", s.Why)
		return noop, nil
	}
	var exp sdktrace.SpanExporter
	// The exporters read the endpoint, headers, timeout, compression and TLS settings from
	// the same environment.
	if s.Protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return noop, fmt.Errorf("create otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "lockernet-"+service),
			attribute.String("service.namespace", "lockernet")),
		// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults above.
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, fmt.Errorf("build otel resource: %w", err)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (parent-based, always on by default), the
	// batch processor's limits from OTEL_BSP_*.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry", "err", err)
	}))
	enabled.Store(true)
	logger.Info("tracing on", "protocol", s.Protocol, "service", res.Set().Encoded(attribute.DefaultEncoder()))
	return func(ctx context.Context) error {
		enabled.Store(false)
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("flush traces: %w", err)
		}
		return nil
	}, nil
}

// Propagator is what crosses process boundaries: W3C traceparent/tracestate and baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}
