package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
)

// The Idempotency-Key header is judged by IdempotencyHeader's tags (huma's header
// validation) behind storableInput, as on every mutating gateway cloud operation. This
// handler has the same two layers and one operation that takes IdempotencyHeader and answers
// the key it received.
func idempotencyKeyHandler() http.Handler {
	installErrorConstructor()
	r := chi.NewRouter()
	r.Use(storableInput)
	cfg := huma.DefaultConfig("idempotency key", "1.0.0")
	cfg.CreateHooks = nil
	cfg.DocsPath, cfg.OpenAPIPath, cfg.SchemasPath = "", "", ""
	api := humachi.New(r, cfg)
	huma.Register(api, op(huma.Operation{
		OperationID: "idempotency-key", Method: http.MethodPost, Path: cloudPrefix + "/idempotency-key",
	}), func(_ context.Context, in *struct{ IdempotencyHeader }) (*struct{ Body struct{ Key string } }, error) {
		out := &struct{ Body struct{ Key string } }{}
		out.Body.Key = in.IdempotencyKey
		return out, nil
	})
	return r
}

// validIdempotencyKey is DESIGN §6.3's rule: 1..255 printable ASCII characters. An absent
// (empty) header is no key.
func validIdempotencyKey(k string) bool {
	if len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// An Idempotency-Key is accepted exactly when it is 1..255 printable ASCII characters (or
// absent), reaches the operation unchanged, and anything else is a 422 VALIDATION_FAILED in
// the gateway cloud's error body, never a panic or a 5xx.
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{"", "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f", "k", " ", "~", "key with spaces", "tab\tkey",
		strings.Repeat("k", 255), strings.Repeat("k", 256), strings.Repeat("k", 100000), "\x00", "key\x00", "\x7f", "\xff\xfe",
		"ключ", "\u202e", "emoji 🔑", "line\nbreak", "trailing\n", "\r\n", "99999999999999999999999", "\"quoted\"", "a,b"} {
		f.Add(s)
	}
	h := idempotencyKeyHandler()
	f.Fuzz(func(t *testing.T, key string) {
		req := httptest.NewRequest(http.MethodPost, cloudPrefix+"/idempotency-key", nil)
		req.Header["Idempotency-Key"] = []string{key}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if validIdempotencyKey(key) {
			if w.Code != http.StatusOK {
				t.Fatalf("valid key %q refused: %d %s", key, w.Code, w.Body)
			}
			var got struct{ Key string }
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Key != key {
				t.Fatalf("key %q reached the operation as %q (%v)", key, got.Key, err)
			}
			return
		}
		if w.Code != http.StatusUnprocessableEntity {
			t.Fatalf("invalid key %q answered %d %s", key, w.Code, w.Body)
		}
		var body struct {
			Error   *string `json:"error"`
			Message *string `json:"message"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error == nil || *body.Error != "VALIDATION_FAILED" || body.Message == nil {
			t.Fatalf("invalid key %q: not the gateway cloud's error body: %s", key, w.Body)
		}
	})
}
