// Package otlptest is an OTLP/HTTP trace receiver that runs inside a test or the load tool:
// processes export to it with OTEL_EXPORTER_OTLP_ENDPOINT=<Receiver.URL>, and it decodes
// every export request (protobuf, optionally gzip) into Spans, so a test can assert what
// crossed the process boundaries.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Service      string // the resource's service.name
	TraceID      string // hex
	SpanID       string // hex
	ParentSpanID string // hex, empty for a root
	Name         string
	Kind         string
	Start, End   time.Time
	Attributes   map[string]string
}

// Receiver collects the spans exported to it.
type Receiver struct {
	// URL is the base URL to export to (the exporters append /v1/traces).
	URL string

	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	spans    []Span
	requests int
	bytes    int64
	// Discard counts requests and bytes without decoding or keeping spans (the load tool).
	discard bool
}

// Start listens on a free 127.0.0.1 port. With discard, spans are counted, not kept.
func Start(discard bool) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for otlp: %w", err)
	}
	r := &Receiver{URL: "http://" + ln.Addr().String(), ln: ln, discard: discard}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.export)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the receiver.
func (r *Receiver) Close() { _ = r.srv.Close() }

// Spans returns a copy of the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Counts returns how many export requests and body bytes were received.
func (r *Receiver) Counts() (requests int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.bytes
}

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, "bad gzip body", http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	data, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var spans []Span
	if !r.discard {
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &msg); err != nil {
			http.Error(w, "bad protobuf body", http.StatusBadRequest)
			return
		}
		spans = flatten(&msg)
	}
	r.mu.Lock()
	r.requests++
	r.bytes += int64(len(data))
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func flatten(msg *coltracepb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Service: service, TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Name: s.GetName(), Kind: s.GetKind().String(),
					Start:      time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:        time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Attributes: attrs(s.GetAttributes()),
				}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentSpanID = hex.EncodeToString(p)
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		default:
			m[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return m
}
