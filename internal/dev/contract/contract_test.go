package contract

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const contractSpec = `{
  "openapi": "3.1.0",
  "info": {"title": "t", "version": "1"},
  "paths": {
    "/things/{id}": {"get": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
      "responses": {
        "200": {"description": "a thing",
          "headers": {"X-RateLimit-Limit": {"schema": {"type": "integer"}}},
          "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false,
            "required": ["id", "at"], "properties": {"id": {"type": "integer"}, "at": {"type": ["string", "null"]}, "name": {"type": "string"}}}}}},
        "404": {"description": "none", "content": {"application/json": {"schema": {"type": "object", "required": ["error"],
          "properties": {"error": {"type": "string"}}}}}}
      }}}
  }
}`

// The contract check fails what the document does not allow, and only that.
func TestContractCatchesWhatTheSpecDoesNotAllow(t *testing.T) {
	answers := map[string]func(w http.ResponseWriter){
		"/things/1": func(w http.ResponseWriter) { // allowed: null where nullable, a declared header
			w.Header().Set("X-RateLimit-Limit", "120")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":1,"at":null}`))
		},
		"/things/2": func(w http.ResponseWriter) { // null where not nullable
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":2,"at":null,"name":null}`))
		},
		"/things/3": func(w http.ResponseWriter) { // a field the schema does not have
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":3,"at":"x","extra":true}`))
		},
		"/things/4": func(w http.ResponseWriter) { // a status the operation does not declare
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"CONFLICT"}`))
		},
		"/things/5": func(w http.ResponseWriter) { // a header the response does not declare
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"NOT_FOUND"}`))
		},
		"/things/6": func(w http.ResponseWriter) { // a declared header of the wrong type
			w.Header().Set("X-RateLimit-Limit", "many")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":6,"at":"x"}`))
		},
		"/things/7": func(w http.ResponseWriter) { // another content type
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(`hello`))
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := answers[r.URL.Path]; ok {
			a(w)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c, err := New(srv.URL, []byte(contractSpec))
	require.NoError(t, err)
	for _, p := range []string{"/things/1", "/things/2", "/things/3", "/things/4", "/things/5", "/things/6", "/things/7", "/nothing"} {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		_ = resp.Body.Close()
		c.Check(http.MethodGet, srv.URL+p, http.Header{}, resp.StatusCode, resp.Header, b)
	}
	v := c.Violations()
	require.Len(t, v, 6, "%s", strings.Join(v, "\n"))
	for i, want := range []string{"/things/2", "/things/3", "/things/4", "/things/5", "/things/6", "/things/7"} {
		assert.Contains(t, v[i], "GET "+want+" ", "violation %d: %s", i, v[i])
	}
	assert.Contains(t, v[3], "header Retry-After is sent but not declared")
	assert.Equal(t, map[string]int{"GET /things/{id}": 7}, c.Checked(), "the unknown path is not the document's business")
}

// The middleware checks what a handler answers, and passes the answer through unchanged.
func TestContractMiddlewareChecksTheServersAnswers(t *testing.T) {
	var c *Contract
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Path == "/things/1" {
				_, _ = w.Write([]byte(`{"id":1,"at":"x"}`))
				return
			}
			_, _ = w.Write([]byte(`{"id":"two","at":"x"}`))
		})).ServeHTTP(w, r)
	}))
	defer srv.Close()
	var err error
	c, err = New(srv.URL, []byte(contractSpec))
	require.NoError(t, err)
	for _, p := range []string{"/things/1", "/things/2"} {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		assert.Contains(t, string(b), `"at":"x"`)
	}
	v := c.Violations()
	require.Len(t, v, 1, "%s", strings.Join(v, "\n"))
	assert.Contains(t, v[0], "GET /things/2 ")
}
