package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestReadSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		on      bool
		proto   string
		wantErr bool
	}{
		{name: "nothing set: off", env: map[string]string{}},
		{name: "endpoint: on over http/protobuf", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true, proto: "http/protobuf"},
		{name: "traces endpoint alone", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, on: true, proto: "http/protobuf"},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, proto: "grpc"},
		{name: "traces protocol wins", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, on: true, proto: "grpc"},
		{name: "sdk disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "unsupported exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
		{name: "unsupported protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: true},
		{name: "bad boolean", env: map[string]string{"OTEL_SDK_DISABLED": "maybe"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := ReadSettings(func(k string) string { return tt.env[k] })
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.on, s.On)
			assert.Equal(t, tt.proto, s.Protocol)
			if !tt.on {
				assert.NotEmpty(t, s.Why, "an operator is told why tracing is off")
			}
		})
	}
}

// The remaining tests switch the process-wide state, so they run one at a time; within one
// process an in-memory exporter is enough (the cross-process path is TestCloudOpenIsOneTrace).
func withTracing(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	enabled.Store(true)
	t.Cleanup(func() {
		enabled.Store(false)
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return exp
}

func routedServer(t *testing.T) *httptest.Server {
	t.Helper()
	r := chi.NewRouter()
	r.Use(Middleware)
	r.Get("/lockers/{lockerId}", func(w http.ResponseWriter, r *http.Request) {
		// The handler sees the request's span, and passes it on.
		if trace.SpanContextFromContext(r.Context()).IsValid() {
			w.Header().Set("X-Traced", "yes")
		}
		w.WriteHeader(http.StatusOK)
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func TestMiddlewareOffTracesNothing(t *testing.T) {
	srv := routedServer(t)
	resp, err := http.Get(srv.URL + "/lockers/7")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("X-Traced"), "no span in the request when tracing is off")
}

func TestMiddlewareNamesSpansAfterRoutes(t *testing.T) {
	exp := withTracing(t)
	srv := routedServer(t)
	for _, path := range []string{"/lockers/7", "/lockers/8", "/healthz"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
	}
	spans := exp.GetSpans()
	require.Len(t, spans, 2, "one span per request; probes are not traced")
	for _, s := range spans {
		assert.Equal(t, "GET /lockers/{lockerId}", s.Name)
		assert.Equal(t, trace.SpanKindServer, s.SpanKind)
	}
	assert.NotEqual(t, spans[0].SpanContext.TraceID(), spans[1].SpanContext.TraceID(), "two requests, two traces")
}

func TestTransportCarriesTraceparentInsideATrace(t *testing.T) {
	exp := withTracing(t)
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Traceparent"))
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: Transport(http.DefaultTransport, "gateway")}

	// Outside any trace (a background health check): no span, no header.
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	ctx, parent := otel.Tracer("test").Start(context.Background(), "activity")
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	resp, err = client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	parent.End()

	require.Len(t, got, 2)
	assert.Empty(t, got[0])
	assert.Contains(t, got[1], parent.SpanContext().TraceID().String(), "the server gets the caller's trace")
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
		if s.Name == "gateway POST" {
			assert.Equal(t, parent.SpanContext().SpanID(), s.Parent.SpanID())
		}
	}
	assert.ElementsMatch(t, []string{"activity", "gateway POST"}, names)
}

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	exp := withTracing(t)
	_ = exp
	var buf bytes.Buffer
	logger := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("process", "test")
	ctx, span := otel.Tracer("test").Start(context.Background(), "request")
	logger.InfoContext(ctx, "inside")
	span.End()
	logger.InfoContext(context.Background(), "outside")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	assert.Contains(t, string(lines[0]), `"trace_id":"`+span.SpanContext().TraceID().String()+`"`)
	assert.Contains(t, string(lines[0]), `"span_id":"`+span.SpanContext().SpanID().String()+`"`)
	assert.NotContains(t, string(lines[1]), "trace_id")
}

// BenchmarkMiddleware compares a request through the middleware with tracing off against
// the bare handler: off must cost next to nothing.
func BenchmarkMiddleware(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	req := httptest.NewRequest(http.MethodGet, "/lockers/7", nil)
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
	})
	b.Run("off", func(b *testing.B) {
		m := Middleware(h)
		for b.Loop() {
			m.ServeHTTP(httptest.NewRecorder(), req)
		}
	})
}
