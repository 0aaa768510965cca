package apiserver

import (
	"bytes"
	"mime"
	"net/http"
	"net/url"
	"unicode/utf8"
)

// storableInput answers 4xx, in the surface's error body, for any request that carries text
// Postgres cannot store: a NUL character or bytes that are not UTF-8, in the path, a query
// parameter, a stored header, a form field or a JSON string. Without it such a value reached
// the database and came back as a 500 (DESIGN §8: no input produces a 5xx); a NUL is never a
// meaningful character in any of our fields. It runs before liftBodyDeadline, which must wrap
// the body it puts back.
func storableInput(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if where := unstorable(w, r); where != "" {
			status := http.StatusUnprocessableEntity
			if surfaceOf(r.URL.Path) == surfaceOAuth {
				status = http.StatusBadRequest // RFC 6749 §5.2: invalid_request
			}
			writeRouterError(w, r, status, where+": contains a NUL character or bytes that are not UTF-8")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownFormChecks are the form endpoints that judge every field themselves: the mobile SDK's
// login answers any credential it cannot match, however malformed, with the 401 the SDK
// expects (a NUL in a username is a wrong username), and stores nothing.
var ownFormChecks = map[string]bool{"/sdk/v1/login/access-token": true}

// storedHeaders are the request headers whose values reach Postgres.
var storedHeaders = []string{"Idempotency-Key"}

// unstorableIn names what of vals cannot be stored: all for a key, valueOf and the key for a
// value; empty when everything can.
func unstorableIn(vals url.Values, all, valueOf string) string {
	for k, vs := range vals {
		if !storable(k) {
			return all
		}
		for _, v := range vs {
			if !storable(v) {
				return valueOf + k
			}
		}
	}
	return ""
}

// unstorable names the first part of the request that holds unstorable text, or "".
func unstorable(w http.ResponseWriter, r *http.Request) string {
	if !storable(r.URL.Path) {
		return "path"
	}
	if q, err := url.ParseQuery(r.URL.RawQuery); err == nil {
		if where := unstorableIn(q, "query", "query parameter "); where != "" {
			return where
		}
	}
	for _, h := range storedHeaders {
		for _, v := range r.Header.Values(h) {
			if !storable(v) {
				return "header " + h
			}
		}
	}
	if r.Body == nil || r.Body == http.NoBody {
		return ""
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	form := mt == "application/x-www-form-urlencoded"
	if !form && mt != "application/json" && !(len(mt) > 5 && mt[len(mt)-5:] == "+json") {
		return "" // huma answers 415 or reads no text from it
	}
	buf, ok := bufferBody(w, r)
	if !ok {
		return "" // no body, or too large: huma answers 413 or 400
	}
	if form {
		if ownFormChecks[r.URL.Path] {
			return ""
		}
		vals, err := url.ParseQuery(string(buf))
		if err != nil {
			return "" // the token endpoint answers invalid_request itself
		}
		return unstorableIn(vals, "form", "form field ")
	}
	if !utf8.Valid(buf) || jsonHasNUL(buf) {
		return "body"
	}
	return ""
}

func storable(s string) bool {
	return utf8.ValidString(s) && !bytes.Contains([]byte(s), []byte{0})
}

// jsonHasNUL reports whether a JSON text holds a NUL inside a string: a raw 0x00 byte or the
// escape \u0000 (an escaped backslash followed by "u0000" is text, not a NUL).
func jsonHasNUL(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] == 'u' && i+5 < len(b) && string(b[i+2:i+6]) == "0000" {
			return true
		}
		i++ // skip the escaped character, so "\\u0000" is not read as an escape
	}
	return false
}
