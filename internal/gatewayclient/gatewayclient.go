// Package gatewayclient is the cloud's HTTP client of the gateways' local APIs: the shared
// transport, one exchange of a gateway request (Send) with whether it was delivered, what a
// gateway's answer says about it (HonoursKeys), and the fixed words in which a failed
// exchange reaches a caller (Cause). The gateway-request activities (activities) and the
// gateway sync (internal/gatewaysync) both call gateways through it; it knows nothing of
// workflows or of Postgres.
package gatewayclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/telemetry"
)

// MaxAnswer bounds what the cloud keeps of an answer; larger ones are rejected (a log query
// with limit=1000 is a few hundred KiB).
const MaxAnswer = 1 << 20

var defaultClient = &http.Client{
	// Traced (a span per call, traceparent to the gateway) once tracing is on.
	Transport: telemetry.Transport(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
	}, "gateway"),
	// A gateway's local API never redirects: a 3xx is someone else's answer, and following
	// it would send the request (a door open) somewhere it was not meant to go.
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Default is the HTTP client that calls gateways' local APIs when no other is given.
func Default() *http.Client { return defaultClient }

// Request is one send of a gateway request to its gateway's local API.
type Request struct {
	// ID is the request's id: every send of a mutating request carries it as its
	// Idempotency-Key.
	ID     string
	Method string
	// Path is the local-API path with its query.
	Path string
	Body []byte
	// Timeout is how long to wait for the answer once the request is delivered.
	Timeout time.Duration
}

// Send performs one HTTP exchange with the gateway at baseURL (through hc, or Default when
// nil). delivered tells whether the request was written to the gateway: an error before
// that means it never arrived. An answer, whatever its status, is SendAnswered.
func Send(ctx context.Context, hc *http.Client, baseURL, secret string, r Request) (res gatewayreq.SendResult, delivered bool, err error) {
	if hc == nil {
		hc = defaultClient
	}
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil {
			wrote.Store(true)
		}
	}}
	cctx, cancel := context.WithTimeout(httptrace.WithClientTrace(ctx, trace), r.Timeout)
	defer cancel()
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(cctx, r.Method, strings.TrimRight(baseURL, "/")+r.Path, body)
	if err != nil {
		return gatewayreq.SendResult{}, false, fmt.Errorf("build gateway request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Accept", "application/json")
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// Every send of one request carries the same key: a gateway that honours it carries
		// the request out once and answers a re-send with what the first send did.
		req.Header.Set("Idempotency-Key", r.ID)
	}

	resp, err := hc.Do(req)
	if err != nil {
		return gatewayreq.SendResult{}, wrote.Load(), err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return gatewayreq.SendResult{}, true, fmt.Errorf("read gateway answer: %w", err)
	}
	res = gatewayreq.SendResult{Outcome: gatewayreq.SendAnswered, Status: resp.StatusCode, Headers: map[string]string{},
		KeysHonoured: HonoursKeys(resp.Header)}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		res.Headers["Content-Type"] = ct
	}
	if v := resp.Header.Get("X-Response-Truncated"); v != "" {
		res.Headers["X-Response-Truncated"] = v
	}
	if len(data) > MaxAnswer {
		res.Error = fmt.Sprintf("the gateway's answer is larger than %d bytes", MaxAnswer)
		return res, true, nil
	}
	res.Body = data
	res.APIJSON = isAPIJSON(resp.Header.Get("Content-Type"), data)
	if res.APIJSON && len(bytes.TrimSpace(data)) > 0 && data[0] == '{' {
		var e struct {
			Error   any    `json:"error"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e) == nil {
			if code, ok := e.Error.(string); ok {
				res.ErrorCode, res.ErrorMessage = code, e.Message
			}
		}
	}
	return res, true, nil
}

// HonoursKeys reads from a gateway's answer whether it honours Idempotency-Key
// (hardware/gateway: X-Idempotency-Keys: honoured).
func HonoursKeys(h http.Header) bool {
	return h.Get("X-Idempotency-Keys") == "honoured"
}

// isAPIJSON reports whether an answer is the local API's own: empty, or JSON declared as JSON.
func isAPIJSON(contentType string, body []byte) bool {
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return false
	}
	return json.Valid(body)
}

// Cause says why an exchange with a gateway failed in words that reach the caller's error
// body: one of a fixed set, never the Go error itself, which names the gateway's internal
// address (the log keeps the full error).
func Cause(err error, delivered bool) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr):
		return "the gateway's host name did not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the gateway refused the connection"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if delivered {
			return "the gateway closed the connection before it answered"
		}
		return "the gateway closed the connection"
	case isTLSError(err):
		return "the TLS handshake with the gateway failed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		if delivered {
			return "the gateway did not answer in time"
		}
		return "the connection to the gateway timed out"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the gateway's network is unreachable"
	}
	if delivered {
		return "the gateway's answer could not be read"
	}
	return "the gateway could not be reached"
}

func isTLSError(err error) bool {
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &rh) || errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}
