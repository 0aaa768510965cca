package towerproto_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// Run for real with
//
//	go test -run '^$' -fuzz FuzzDecodeHex -fuzztime 30s ./internal/towerproto/
//	go test -run '^$' -fuzz FuzzNormalizeTowerID -fuzztime 30s ./internal/towerproto/

func isHexDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// FuzzDecodeHex: the hex of every payload and authenticator a client sends (tokens, event
// batches, sessions, command packets) is accepted exactly when it is non-empty, even-length
// hex in either case within the size limit; the bytes re-encode to the input in lower case
// (one value, one spelling up to case) and a refusal wraps ErrMalformed.
func FuzzDecodeHex(f *testing.F) {
	for _, tc := range []struct {
		s   string
		max int
	}{
		{"00", 1}, {"0a1B", 2}, {"DEADBEEF", 4}, {"deadbeef", 3}, {"", 8}, {"0", 8}, {"abc", 8}, {"0x00", 8}, {"zz", 8},
		{" 00", 8}, {"00 ", 8}, {"00\x00", 8}, {"\x0000", 8}, {"\xff\xfe", 8}, {"éé", 8}, {"００", 8}, {"+0", 8},
		{strings.Repeat("ab", 65536), 65536}, {strings.Repeat("ab", 65537), 65536}, {"00", 0}, {"00", -1},
		{"00", 1 << 62}, {"1e309", 8}, {"99999999999999999999999999", 32},
	} {
		f.Add(tc.s, tc.max)
	}
	f.Fuzz(func(t *testing.T, s string, maxBytes int) {
		b, err := towerproto.DecodeHex(s, maxBytes)
		valid := s != "" && len(s)%2 == 0 && len(s)/2 <= maxBytes && isHexDigits(s)
		if (err == nil) != valid {
			t.Fatalf("DecodeHex(%q, %d): err = %v, valid = %v", s, maxBytes, err, valid)
		}
		if err != nil {
			if !errors.Is(err, towerproto.ErrMalformed) {
				t.Fatalf("DecodeHex(%q, %d): %v does not wrap ErrMalformed", s, maxBytes, err)
			}
			return
		}
		if got := hex.EncodeToString(b); got != strings.ToLower(s) {
			t.Fatalf("DecodeHex(%q) re-encodes to %q", s, got)
		}
	})
}

// FuzzNormalizeTowerID: a tower id is accepted exactly when it is 16 hex digits in either
// case; the canonical form is its lower case, normalizing it again changes nothing, and a
// refusal wraps ErrMalformed.
func FuzzNormalizeTowerID(f *testing.F) {
	for _, s := range []string{"0100000000000014", "01000000000000AB", "01000000000000ag", "", "0", "010000000000001",
		"01000000000000140", "0x00000000000014", " 100000000000014", "010000000000001\x00", "\xff\xfe00000000000000",
		"ffffffffffffffff", "FFFFFFFFFFFFFFFF", "18446744073709551616", "０１００００００００００００００１４", "-100000000000014",
		"0100000000000014\n", strings.Repeat("0", 10000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := towerproto.NormalizeTowerID(s)
		valid := len(s) == 16 && isHexDigits(s)
		if (err == nil) != valid {
			t.Fatalf("NormalizeTowerID(%q): err = %v, valid = %v", s, err, valid)
		}
		if err != nil {
			if !errors.Is(err, towerproto.ErrMalformed) {
				t.Fatalf("NormalizeTowerID(%q): %v does not wrap ErrMalformed", s, err)
			}
			return
		}
		if id != strings.ToLower(s) {
			t.Fatalf("NormalizeTowerID(%q) = %q, want its lower case", s, id)
		}
		if again, err := towerproto.NormalizeTowerID(id); err != nil || again != id {
			t.Fatalf("NormalizeTowerID(%q) = %q, %v: not a fixed point", id, again, err)
		}
	})
}
