package apiserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"
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

// parseAccessCode accepts exactly six ASCII digits with white space around them (DESIGN §5),
// answers those digits, refuses everything else, and accepts every code newCodeDigits makes.
func FuzzParseAccessCode(f *testing.F) {
	for _, s := range []string{"123456", "000000", "999999", " 123456 ", "\t123456\n", "12345", "1234567", "", "      ",
		"12 456", "12345a", "-12345", "+12345", "1e5000", "١٢٣٤٥٦", "１２３４５６", "123456\x00", "\x00123456", "12\xff456",
		"\u00a0123456\u2003", "99999999999999999999999", strings.Repeat("1", 10000), "0x1234", "12345６"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		digits, ok := parseAccessCode(s)
		want := strings.TrimFunc(s, unicode.IsSpace)
		valid := len(want) == 6
		for i := 0; i < len(want); i++ {
			valid = valid && want[i] >= '0' && want[i] <= '9'
		}
		if ok != valid {
			t.Fatalf("parseAccessCode(%q) accepted = %v, want %v", s, ok, valid)
		}
		if ok && digits != want {
			t.Fatalf("parseAccessCode(%q) = %q, want %q", s, digits, want)
		}
		if !ok && digits != "" {
			t.Fatalf("parseAccessCode(%q) refused but answered %q", s, digits)
		}
		made, err := newCodeDigits()
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := parseAccessCode(made); !ok || d != made {
			t.Fatalf("a generated code %q is refused", made)
		}
	})
}
