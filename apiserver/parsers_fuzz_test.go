package apiserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// parsePrefer never panics on any header value, never waits outside [0, max], and applies
// only what it was asked.
func FuzzParsePrefer(f *testing.F) {
	for _, s := range []string{"", "respond-async", "wait=10", "respond-async, wait=5", "wait=-1", "wait=99999999999999999999",
		"wait=\"3\"", "wait", "wait=1;x=2", "handling=lenient", "RESPOND-ASYNC", ",,,", "wait=1, wait=2", "\x00wait=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		p := parsePrefer([]string{v}, 15*time.Second, 30*time.Second)
		if p.wait < 0 || p.wait > 30*time.Second {
			t.Fatalf("wait %s out of [0, 30s] for %q", p.wait, v)
		}
		for _, a := range p.applied {
			if a != "respond-async" && !strings.HasPrefix(a, "wait=") {
				t.Fatalf("applied %q for %q", a, v)
			}
		}
	})
}

// FlexID accepts exactly the positive integers, as numbers or digit strings, and refuses the
// rest without panicking.
func FuzzFlexID(f *testing.F) {
	for _, s := range []string{`7`, `"7"`, `" 7 "`, `0`, `-1`, `"abc"`, `1e3`, `9223372036854775807`, `9223372036854775808`,
		`null`, `""`, `{}`, `[]`, `"\u0000"`, `7.0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var id FlexID
		if err := json.Unmarshal(b, &id); err == nil && id < 1 {
			t.Fatalf("accepted %d from %q", id, b)
		}
		var opt OptFlexID
		if err := json.Unmarshal(b, &opt); err == nil && opt.Set && opt.ID < 1 {
			t.Fatalf("accepted optional %d from %q", opt.ID, b)
		}
	})
}
