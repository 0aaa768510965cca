package apiserver

import (
	"encoding/json"
	"strings"
	"testing"
)

// jsonHasNUL agrees with a real JSON decoder: a valid JSON text holds a NUL in some string
// exactly when jsonHasNUL says so.
func FuzzJSONHasNUL(f *testing.F) {
	for _, s := range []string{`{"a": "b"}`, `{"userId": "\u0000"}`, `{"a": "\\u0000"}`, `{"a": "\\\u0000"}`,
		`["x", {"k\u0000": 1}]`, `"\\\\u0000"`, `{"a": "\u00000"}`, `{"a": 1}`, `"\u0001"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if got, want := jsonHasNUL(b), holdsNUL(v); got != want {
			t.Fatalf("jsonHasNUL(%q) = %v, the decoded value says %v", b, got, want)
		}
	})
}

func holdsNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case []any:
		for _, e := range x {
			if holdsNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) || holdsNUL(e) {
				return true
			}
		}
	}
	return false
}
