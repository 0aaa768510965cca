package credential_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/lockernet/lockernet/internal/credential"
)

// FuzzIsGatewayKey: a presented gateway cloud API key passes the shape check exactly when it
// is "lnk_" and 64 lower-case hex digits (DESIGN §2); the hex of an accepted key decodes to
// 32 bytes that re-encode to the same text, and every key NewGatewayKey makes passes.
func FuzzIsGatewayKey(f *testing.F) {
	good := credential.GatewayKeyPrefix + strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{good, strings.ToUpper(good), credential.GatewayKeyPrefix + strings.Repeat("0123456789ABCDEF", 4),
		"", "lnk_", "LNK_" + good[4:], good[:len(good)-1], good + "0", " " + good, good + "\n", good[:20] + "\x00" + good[21:],
		good[:20] + "g" + good[21:], good[:66] + "\xff\xfe", "lnk_" + strings.Repeat("é", 32), "lnk_" + strings.Repeat("０", 64),
		"lnk_" + strings.Repeat("9", 64), "lnk_0x" + strings.Repeat("0", 62), strings.Repeat("lnk_", 10000), "Bearer " + good} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rest, hasPrefix := strings.CutPrefix(s, "lnk_")
		valid := hasPrefix && len(rest) == 64
		for i := 0; valid && i < len(rest); i++ {
			valid = rest[i] >= '0' && rest[i] <= '9' || rest[i] >= 'a' && rest[i] <= 'f'
		}
		if got := credential.IsGatewayKey(s); got != valid {
			t.Fatalf("IsGatewayKey(%q) = %v, want %v", s, got, valid)
		}
		if valid {
			b, err := hex.DecodeString(rest)
			if err != nil || len(b) != 32 || hex.EncodeToString(b) != rest {
				t.Fatalf("accepted key %q does not round-trip through its 32 bytes (%v)", s, err)
			}
		}
		if k := credential.NewGatewayKey(); !credential.IsGatewayKey(k) {
			t.Fatalf("a new key %q fails the shape check", k)
		}
	})
}
