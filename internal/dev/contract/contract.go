// Package contract checks answers against an OpenAPI document (DESIGN §8): every answer the
// tests receive from the apiserver (testenv's one HTTP exchange) and every answer a test
// gateway gives (gatewaytest's middleware) is validated against the document its server
// serves, with kin-openapi's openapi3filter. Its status must be declared (or a default), its
// declared headers must match their schemas, the API headers it carries must be declared,
// and its body must match the schema of its content type. The violations fail the test that
// saw them, so a field, status or header the code sends and the spec does not allow fails the
// build.
package contract

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// apiHeaders are the response headers the services define; an answer that carries one must
// declare it on the operation's response.
var apiHeaders = []string{
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "Location",
	"X-Request-Id", "X-Gateway-Id", "X-Request-Duration-Ms", "X-Request-State", "Preference-Applied",
	"Idempotent-Replayed", "X-Response-Truncated", "Deprecation", "Sunset", "X-Idempotency-Keys",
}

func init() {
	// HTML answers (the gateway's admin page) are checked as text.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
}

// Contract validates the answers of one server against its OpenAPI document.
type Contract struct {
	base   string
	doc    *openapi3.T
	router routers.Router

	mu         sync.Mutex
	idle       *sync.Cond // signalled when pending drops to 0
	pending    int        // the middleware's checks in flight
	violations []string
	checked    map[string]int // "METHOD path-template" → answers validated
}

// New loads spec (an OpenAPI 3.1 document, JSON or YAML) for the server at baseURL.
func New(baseURL string, spec []byte) (*Contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	base := strings.TrimRight(baseURL, "/")
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route the OpenAPI document: %w", err)
	}
	c := &Contract{base: base, doc: doc, router: router, checked: map[string]int{}}
	c.idle = sync.NewCond(&c.mu)
	return c, nil
}

// Base is the server's base URL.
func (c *Contract) Base() string { return c.base }

// Covers reports whether fullURL is an address of the contract's server.
func (c *Contract) Covers(fullURL string) bool {
	return fullURL == c.base || strings.HasPrefix(fullURL, c.base+"/") || strings.HasPrefix(fullURL, c.base+"?")
}

// Violations are the answers seen so far that the document does not allow.
func (c *Contract) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pending > 0 {
		c.idle.Wait()
	}
	return append([]string(nil), c.violations...)
}

// Checked lists the operations ("METHOD /path/{template}") whose answers were validated, with
// how many.
func (c *Contract) Checked() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.checked))
	for k, v := range c.checked {
		out[k] = v
	}
	return out
}

// Operations lists every operation of the document ("METHOD /path/{template}").
func (c *Contract) Operations() []string {
	var out []string
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// Check validates one answer; answers to requests the document has no operation for
// (unknown paths, OPTIONS, the docs pages) are not its business.
func (c *Contract) Check(method, fullURL string, reqHeader http.Header, status int, header http.Header, body []byte) {
	u, err := url.Parse(fullURL)
	if err != nil || method == http.MethodHead || method == http.MethodOptions {
		return
	}
	req := &http.Request{Method: method, URL: u, Header: reqHeader.Clone(), Host: u.Host}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return
	}
	fail := func(format string, args ...any) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.violations = append(c.violations, fmt.Sprintf("%s %s → %d: %s (body: %.300s)", method, u.RequestURI(), status, fmt.Sprintf(format, args...), body))
	}
	c.mu.Lock()
	c.checked[method+" "+route.Path]++
	c.mu.Unlock()

	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		fail("%v", err)
		return
	}
	resp := route.Operation.Responses.Status(status)
	if resp == nil {
		resp = route.Operation.Responses.Default()
	}
	if resp == nil || resp.Value == nil {
		return
	}
	for _, h := range apiHeaders {
		if header.Get(h) == "" {
			continue
		}
		declared := false
		for name := range resp.Value.Headers {
			if strings.EqualFold(name, h) {
				declared = true
			}
		}
		if !declared {
			fail("header %s is sent but not declared", h)
		}
	}
	if len(resp.Value.Content) == 0 && len(bytes.TrimSpace(body)) > 0 {
		fail("a body is sent but the response declares none")
	}
}

// maxCapture bounds the body the middleware keeps for validation.
const maxCapture = 4 << 20

// Middleware validates every answer next gives (the answer itself is passed through
// unchanged, streamed as the handler writes it); Violations waits for the checks in flight.
func (c *Contract) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		reqHeader := r.Header.Clone()
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if rec.overflow || r.Context().Err() != nil {
			// Too large to keep, or the caller left: nobody receives this answer.
			return
		}
		// Checked beside the connection, so the answer is not held up by its check.
		method, status, header, body, target := r.Method, rec.status, rec.Header().Clone(), rec.body.Bytes(), c.base+r.URL.RequestURI()
		c.mu.Lock()
		c.pending++
		c.mu.Unlock()
		go func() {
			c.Check(method, target, reqHeader, status, header, body)
			c.mu.Lock()
			if c.pending--; c.pending == 0 {
				c.idle.Broadcast()
			}
			c.mu.Unlock()
		}()
	})
}

type recorder struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	overflow bool
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(b) > maxCapture {
		r.overflow = true
	} else {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("hijack not supported")
	}
	r.overflow = true // what goes over a hijacked connection is not an HTTP answer to check
	return h.Hijack()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
