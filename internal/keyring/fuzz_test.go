package keyring_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/lockernet/lockernet/internal/keyring"
)

// FuzzParseKey: the master key setting (or key file) is accepted exactly when it is 64 hex
// digits in either case with white space around them; the key is 32 bytes that re-encode to
// the digits in lower case, and every accepted key builds a keyring.
func FuzzParseKey(f *testing.F) {
	good := strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{good, strings.ToUpper(good), good + "\n", "  " + good + "\r\n", "", good[:63], good + "0", good + "00",
		"0x" + good[2:], good[:10] + "\x00" + good[11:], good[:10] + "g" + good[11:], good[:62] + "\xff\xfe", strings.Repeat("é", 32),
		strings.Repeat("０", 64), "\u00a0" + good + "\u2003", strings.Repeat("9", 100000), good[:32] + " " + good[33:]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := keyring.ParseKey(s)
		digits := strings.TrimSpace(s)
		valid := len(digits) == 2*keyring.KeySize
		for i := 0; valid && i < len(digits); i++ {
			c := digits[i]
			valid = c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
		}
		if (err == nil) != valid {
			t.Fatalf("ParseKey(%q): err = %v, valid = %v", s, err, valid)
		}
		if err != nil {
			return
		}
		if len(key) != keyring.KeySize || hex.EncodeToString(key) != strings.ToLower(digits) {
			t.Fatalf("ParseKey(%q) = %x: does not round-trip", s, key)
		}
		if _, err := keyring.New(key); err != nil {
			t.Fatalf("an accepted key builds no keyring: %v", err)
		}
	})
}
