package towerproto_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// Golden vectors. They pin the key derivation and both wire formats: if one of these tests
// fails, towers in the field would stop accepting tokens or the cloud would stop accepting
// their events. Fix the code, not the vector (the key vectors were cross-checked with an
// independent HKDF implementation).
const (
	goldenTokenKey = "f5c1fa7f05d7a3d72c4f355b77482f50e416b84ab77ed93aa17805e91cacea35"
	goldenEventKey = "7c92198d0d61ffbd83b3677381fc3b6607d6ae64a6c57fdf6d1206b709cb9b44"

	goldenTokenPayload = "01" + // version
		"0123456789ab4def8011223344556677" + // token id
		"0100000000000014" + // tower id
		"00000000000003bf" + // locker id 959
		"02" + // pickup
		"00000007" + // generation 7
		"0000000070dd5525" + // 2030-01-02T03:04:05Z
		"a1a2a3a4a5a6a7a8" // nonce
	goldenTokenAuth = "00e5d62b1a722d5a90d6fb1047c88d41ccb7acb45417d6300d1d4d674781c080bc"
)

func goldenSecret() []byte {
	s := make([]byte, 32)
	for i := range s {
		s[i] = byte(i)
	}
	return s
}

func goldenToken() towerproto.Token {
	return towerproto.Token{
		ID:         uuid.MustParse("01234567-89ab-4def-8011-223344556677"),
		TowerID:    "0100000000000014",
		LockerID:   959,
		Type:       towerproto.TokenPickup,
		Generation: 7,
		ExpiresAt:  time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		Nonce:      [8]byte{0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8},
	}
}

// signHex signs raw payload bytes the way the format says, independently of the package, so
// tests can build payloads the encoder would refuse to write.
func signHex(key, payload []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	return "00" + hex.EncodeToString(mac.Sum(nil))
}

func flipHexByte(t *testing.T, s string, i int) string {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	b[i] ^= 0x01
	return hex.EncodeToString(b)
}

func TestKeyDerivationGolden(t *testing.T) {
	t.Parallel()
	assert.Equal(t, goldenTokenKey, hex.EncodeToString(towerproto.TokenKey(goldenSecret())))
	assert.Equal(t, goldenEventKey, hex.EncodeToString(towerproto.EventKey(goldenSecret())))
	assert.NotEqual(t, towerproto.TokenKey([]byte("a")), towerproto.TokenKey([]byte("b")))
}

func TestEncodeTokenGolden(t *testing.T) {
	t.Parallel()
	payload, auth, err := towerproto.EncodeToken(goldenToken(), towerproto.TokenKey(goldenSecret()))
	require.NoError(t, err)
	assert.Equal(t, goldenTokenPayload, payload)
	assert.Equal(t, goldenTokenAuth, auth)
	assert.Len(t, payload, 2*towerproto.TokenPayloadLen)
}

func TestDecodeTokenGolden(t *testing.T) {
	t.Parallel()
	got, err := towerproto.DecodeToken(goldenTokenPayload, goldenTokenAuth, towerproto.TokenKey(goldenSecret()))
	require.NoError(t, err)
	assert.Equal(t, goldenToken(), got)
}

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	key := towerproto.TokenKey([]byte("round-trip secret"))
	base := goldenToken()
	tests := []struct {
		name   string
		modify func(*towerproto.Token)
		want   func(*towerproto.Token) // expected changes after the round trip
	}{
		{name: "pickup", modify: func(*towerproto.Token) {}},
		{name: "dropoff", modify: func(tk *towerproto.Token) { tk.Type = towerproto.TokenDropoff }},
		{name: "release", modify: func(tk *towerproto.Token) { tk.Type = towerproto.TokenRelease }},
		{name: "extreme numbers", modify: func(tk *towerproto.Token) {
			tk.LockerID = math.MaxInt64
			tk.Generation = math.MaxUint32
			tk.ID = [16]byte{}
			tk.Nonce = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		}},
		{name: "expiry before 1970", modify: func(tk *towerproto.Token) {
			tk.ExpiresAt = time.Date(1960, 5, 6, 7, 8, 9, 0, time.UTC)
		}},
		{
			name:   "sub-second expiry is truncated to the second",
			modify: func(tk *towerproto.Token) { tk.ExpiresAt = tk.ExpiresAt.Add(999 * time.Millisecond) },
			want:   func(tk *towerproto.Token) { tk.ExpiresAt = tk.ExpiresAt.Truncate(time.Second) },
		},
		{
			name:   "expiry in another zone comes back in UTC",
			modify: func(tk *towerproto.Token) { tk.ExpiresAt = tk.ExpiresAt.In(time.FixedZone("PST", -8*3600)) },
			want:   func(tk *towerproto.Token) { tk.ExpiresAt = tk.ExpiresAt.UTC() },
		},
		{
			name:   "upper-case tower id comes back lower-case",
			modify: func(tk *towerproto.Token) { tk.TowerID = "ABCDEF0123456789" },
			want:   func(tk *towerproto.Token) { tk.TowerID = "abcdef0123456789" },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := base
			tc.modify(&in)
			payload, auth, err := towerproto.EncodeToken(in, key)
			require.NoError(t, err)
			assert.Equal(t, strings.ToLower(payload), payload)
			assert.Equal(t, strings.ToLower(auth), auth)

			out, err := towerproto.DecodeToken(payload, auth, key)
			require.NoError(t, err)
			want := in
			if tc.want != nil {
				tc.want(&want)
			}
			assert.Equal(t, want, out)

			tower, err := towerproto.PeekTokenTower(payload)
			require.NoError(t, err)
			assert.Equal(t, want.TowerID, tower)
		})
	}
}

func TestDecodeTokenTamperedIsBadMAC(t *testing.T) {
	t.Parallel()
	key := towerproto.TokenKey(goldenSecret())
	for i := 0; i < len(goldenTokenPayload)/2; i++ {
		_, err := towerproto.DecodeToken(flipHexByte(t, goldenTokenPayload, i), goldenTokenAuth, key)
		assert.ErrorIs(t, err, towerproto.ErrBadMAC, "payload byte %d flipped", i)
	}
	for i := 0; i < len(goldenTokenAuth)/2; i++ {
		_, err := towerproto.DecodeToken(goldenTokenPayload, flipHexByte(t, goldenTokenAuth, i), key)
		assert.ErrorIs(t, err, towerproto.ErrBadMAC, "auth byte %d flipped", i)
	}

	_, err := towerproto.DecodeToken(goldenTokenPayload, goldenTokenAuth, towerproto.TokenKey([]byte("another tower")))
	assert.ErrorIs(t, err, towerproto.ErrBadMAC, "another tower's key")
	_, err = towerproto.DecodeToken(goldenTokenPayload, goldenTokenAuth, towerproto.EventKey(goldenSecret()))
	assert.ErrorIs(t, err, towerproto.ErrBadMAC, "the event key of the same tower")
}

func TestDecodeTokenMalformed(t *testing.T) {
	t.Parallel()
	key := towerproto.TokenKey(goldenSecret())
	tests := []struct {
		name, payload, auth string
	}{
		{"empty payload", "", goldenTokenAuth},
		{"empty auth", goldenTokenPayload, ""},
		{"odd-length payload", goldenTokenPayload[:len(goldenTokenPayload)-1], goldenTokenAuth},
		{"odd-length auth", goldenTokenPayload, goldenTokenAuth[:len(goldenTokenAuth)-1]},
		{"payload truncated by one byte", goldenTokenPayload[:len(goldenTokenPayload)-2], goldenTokenAuth},
		{"payload with an extra byte", goldenTokenPayload + "00", goldenTokenAuth},
		{"version byte only", "01", goldenTokenAuth},
		{"auth truncated by one byte", goldenTokenPayload, goldenTokenAuth[:len(goldenTokenAuth)-2]},
		{"auth with an extra byte", goldenTokenPayload, goldenTokenAuth + "00"},
		{"garbage payload", "not hex at all!", goldenTokenAuth},
		{"garbage auth", goldenTokenPayload, "zz" + goldenTokenAuth[2:]},
		{"0x prefix", "0x" + goldenTokenPayload, goldenTokenAuth},
		{"whitespace", goldenTokenPayload + " ", goldenTokenAuth},
		{"huge payload", strings.Repeat("00", 1<<20), goldenTokenAuth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := towerproto.DecodeToken(tc.payload, tc.auth, key)
			assert.ErrorIs(t, err, towerproto.ErrMalformed)
			assert.NotErrorIs(t, err, towerproto.ErrBadMAC)
		})
	}
}

func TestDecodeTokenSignedButInvalid(t *testing.T) {
	t.Parallel()
	key := towerproto.TokenKey(goldenSecret())
	golden, err := hex.DecodeString(goldenTokenPayload)
	require.NoError(t, err)
	tests := []struct {
		name    string
		payload func() []byte
		wantErr error
	}{
		{"unknown payload version", func() []byte { p := clone(golden); p[0] = 0x02; return p }, towerproto.ErrVersion},
		{"unknown version, other length", func() []byte { return []byte{0x02, 0xaa} }, towerproto.ErrVersion},
		{"type zero", func() []byte { p := clone(golden); p[33] = 0; return p }, towerproto.ErrMalformed},
		{"type four", func() []byte { p := clone(golden); p[33] = 4; return p }, towerproto.ErrMalformed},
		{"locker id zero", func() []byte { p := clone(golden); clear(p[25:33]); return p }, towerproto.ErrMalformed},
		{"negative locker id", func() []byte { p := clone(golden); p[25] = 0x80; return p }, towerproto.ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.payload()
			_, err := towerproto.DecodeToken(hex.EncodeToString(p), signHex(key, p), key)
			assert.ErrorIs(t, err, tc.wantErr)
		})
	}

	t.Run("unknown key version", func(t *testing.T) {
		t.Parallel()
		_, err := towerproto.DecodeToken(goldenTokenPayload, "01"+goldenTokenAuth[2:], key)
		assert.ErrorIs(t, err, towerproto.ErrBadMAC)
		assert.ErrorIs(t, err, towerproto.ErrVersion)
	})
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

func TestEncodeTokenRefusesInvalid(t *testing.T) {
	t.Parallel()
	key := towerproto.TokenKey(goldenSecret())
	tests := []struct {
		name    string
		modify  func(*towerproto.Token)
		key     []byte
		wantErr error
	}{
		{name: "short tower id", modify: func(tk *towerproto.Token) { tk.TowerID = "01000000000014" }, wantErr: towerproto.ErrMalformed},
		{name: "non-hex tower id", modify: func(tk *towerproto.Token) { tk.TowerID = "010000000000001g" }, wantErr: towerproto.ErrMalformed},
		{name: "locker id zero", modify: func(tk *towerproto.Token) { tk.LockerID = 0 }, wantErr: towerproto.ErrMalformed},
		{name: "negative locker id", modify: func(tk *towerproto.Token) { tk.LockerID = -3 }, wantErr: towerproto.ErrMalformed},
		{name: "no type", modify: func(tk *towerproto.Token) { tk.Type = 0 }, wantErr: towerproto.ErrMalformed},
		{name: "no expiry", modify: func(tk *towerproto.Token) { tk.ExpiresAt = time.Time{} }, wantErr: towerproto.ErrMalformed},
		{name: "raw secret as key", modify: func(*towerproto.Token) {}, key: []byte("short"), wantErr: towerproto.ErrKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk := goldenToken()
			tc.modify(&tk)
			k := key
			if tc.key != nil {
				k = tc.key
			}
			_, _, err := towerproto.EncodeToken(tk, k)
			assert.ErrorIs(t, err, tc.wantErr)
		})
	}

	_, err := towerproto.DecodeToken(goldenTokenPayload, goldenTokenAuth, nil)
	assert.ErrorIs(t, err, towerproto.ErrKey)
}

func TestPeekTokenTower(t *testing.T) {
	t.Parallel()
	tower, err := towerproto.PeekTokenTower(goldenTokenPayload)
	require.NoError(t, err)
	assert.Equal(t, "0100000000000014", tower)

	_, err = towerproto.PeekTokenTower(goldenTokenPayload[:20])
	assert.ErrorIs(t, err, towerproto.ErrMalformed)
	_, err = towerproto.PeekTokenTower("02" + goldenTokenPayload[2:])
	assert.ErrorIs(t, err, towerproto.ErrVersion)
}

// checkNames checks that each value's String is its name, and that parse reads the
// name back as the value.
func checkNames[V interface {
	comparable
	String() string
}](t *testing.T, names map[V]string, parse func(string) (V, error)) {
	t.Helper()
	for v, name := range names {
		assert.Equal(t, name, v.String())
		got, err := parse(name)
		require.NoError(t, err)
		assert.Equal(t, v, got)
	}
}

func TestTokenTypeNames(t *testing.T) {
	t.Parallel()
	checkNames(t, map[towerproto.TokenType]string{
		towerproto.TokenDropoff: "dropoff",
		towerproto.TokenPickup:  "pickup",
		towerproto.TokenRelease: "release",
	}, towerproto.ParseTokenType)
	assert.Equal(t, "TokenType(9)", towerproto.TokenType(9).String())
	_, err := towerproto.ParseTokenType("Pickup")
	assert.ErrorIs(t, err, towerproto.ErrMalformed)
}

func TestNormalizeTowerID(t *testing.T) {
	t.Parallel()
	got, err := towerproto.NormalizeTowerID("ABCDEF0123456789")
	require.NoError(t, err)
	assert.Equal(t, "abcdef0123456789", got)
	for _, bad := range []string{"", "abc", "abcdef012345678", "abcdef01234567890", "abcdef012345678x"} {
		_, err := towerproto.NormalizeTowerID(bad)
		assert.ErrorIs(t, err, towerproto.ErrMalformed, bad)
	}
}

func TestDecodeTokenEitherCase(t *testing.T) {
	t.Parallel()
	key := towerproto.TokenKey(goldenSecret())
	got, err := towerproto.DecodeToken(strings.ToUpper(goldenTokenPayload), strings.ToUpper(goldenTokenAuth), key)
	require.NoError(t, err)
	assert.Equal(t, goldenToken(), got)
}
