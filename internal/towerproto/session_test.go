package towerproto_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/towerproto"
)

func testSession() towerproto.Session {
	return towerproto.Session{
		ID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, TowerID: "0100000000000014",
		ClientID: "demo-client", UserID: "user-17", Claims: []string{towerproto.ClaimLockerDelivery},
		Permission: towerproto.PermSync | towerproto.PermOpenDropoff, Seed: bytes.Repeat([]byte{0xab}, towerproto.SeedSize),
		IssuedAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), ExpiresAt: time.Date(2030, 1, 2, 4, 4, 5, 0, time.UTC),
	}
}

func TestSessionRoundTrip(t *testing.T) {
	t.Parallel()
	key := towerproto.SessionKey(goldenSecret())
	p, a, err := towerproto.SealSession(testSession(), key, rand.Reader)
	require.NoError(t, err)
	assert.Len(t, a, 2*17, "00 + GCM tag")
	assert.True(t, strings.HasPrefix(p, "010100000000000014"), "version and tower id in clear")

	got, err := towerproto.OpenSession(p, a, key)
	require.NoError(t, err)
	assert.Equal(t, testSession(), got)

	// The SDK sends hex upper-case.
	got, err = towerproto.OpenSession(strings.ToUpper(p), strings.ToUpper(a), key)
	require.NoError(t, err)
	assert.Equal(t, testSession(), got)

	tower, err := towerproto.PeekSessionTower(p)
	require.NoError(t, err)
	assert.Equal(t, "0100000000000014", tower)

	// Two seals of the same session differ (fresh nonce): nothing repeats on the wire.
	p2, _, err := towerproto.SealSession(testSession(), key, rand.Reader)
	require.NoError(t, err)
	assert.NotEqual(t, p, p2)
}

func TestSessionOnlyItsTowerReadsIt(t *testing.T) {
	t.Parallel()
	key := towerproto.SessionKey(goldenSecret())
	p, a, err := towerproto.SealSession(testSession(), key, rand.Reader)
	require.NoError(t, err)
	for _, k := range [][]byte{
		towerproto.SessionKey([]byte("another tower's secret")),
		towerproto.TokenKey(goldenSecret()),
		towerproto.CommandKey(goldenSecret()),
	} {
		_, err := towerproto.OpenSession(p, a, k)
		assert.ErrorIs(t, err, towerproto.ErrBadMAC)
	}
	for i := 0; i < len(p)/2; i++ {
		_, err := towerproto.OpenSession(flipHexByte(t, p, i), a, key)
		assert.Error(t, err, "payload byte %d flipped", i)
		if i > 0 {
			assert.ErrorIs(t, err, towerproto.ErrBadMAC, "payload byte %d flipped", i)
		}
	}
	for i := 0; i < len(a)/2; i++ {
		_, err := towerproto.OpenSession(p, flipHexByte(t, a, i), key)
		assert.ErrorIs(t, err, towerproto.ErrBadMAC, "auth byte %d flipped", i)
	}
	for _, tc := range []struct{ name, p, a string }{
		{"empty", "", a}, {"empty auth", p, ""}, {"odd", p[1:], a}, {"header only", p[:42], a},
		{"not hex", "zz" + p[2:], a}, {"huge", strings.Repeat("01", 5000), a},
	} {
		_, err := towerproto.OpenSession(tc.p, tc.a, key)
		assert.Error(t, err, tc.name)
		assert.NotErrorIs(t, err, towerproto.ErrKey, tc.name)
	}
}

func TestSealSessionRefusesInvalid(t *testing.T) {
	t.Parallel()
	key := towerproto.SessionKey(goldenSecret())
	for name, modify := range map[string]func(*towerproto.Session){
		"bad tower":     func(s *towerproto.Session) { s.TowerID = "tower" },
		"short seed":    func(s *towerproto.Session) { s.Seed = s.Seed[:5] },
		"no client":     func(s *towerproto.Session) { s.ClientID = "" },
		"expires first": func(s *towerproto.Session) { s.ExpiresAt = s.IssuedAt },
	} {
		s := testSession()
		modify(&s)
		_, _, err := towerproto.SealSession(s, key, rand.Reader)
		assert.ErrorIs(t, err, towerproto.ErrMalformed, name)
	}
}

func TestClaimPermissions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		claim string
		can   []towerproto.Permission
		not   []towerproto.Permission
	}{
		{towerproto.ClaimSyncPacket, []towerproto.Permission{towerproto.PermSync},
			[]towerproto.Permission{towerproto.PermOpenDropoff, towerproto.PermOpenPickup, towerproto.PermMaintenance, towerproto.PermConfigure}},
		{towerproto.ClaimLockerDelivery, []towerproto.Permission{towerproto.PermSync, towerproto.PermOpenDropoff},
			[]towerproto.Permission{towerproto.PermOpenPickup, towerproto.PermMaintenance, towerproto.PermConfigure}},
		{towerproto.ClaimLockerPickup, []towerproto.Permission{towerproto.PermSync, towerproto.PermOpenPickup},
			[]towerproto.Permission{towerproto.PermOpenDropoff, towerproto.PermMaintenance, towerproto.PermConfigure}},
		{towerproto.ClaimTechnician, []towerproto.Permission{towerproto.PermSync, towerproto.PermOpenDropoff, towerproto.PermOpenPickup,
			towerproto.PermMaintenance, towerproto.PermConfigure}, []towerproto.Permission{towerproto.PermAdminister}},
		{towerproto.ClaimOwner, []towerproto.Permission{towerproto.PermAll}, nil},
		{towerproto.ClaimDeveloper, []towerproto.Permission{towerproto.PermAll}, nil},
	}
	for _, tc := range tests {
		p, ok := towerproto.ClaimPermission(tc.claim)
		require.True(t, ok, tc.claim)
		for _, c := range tc.can {
			assert.True(t, p.Has(c), "%s can %b", tc.claim, c)
		}
		for _, c := range tc.not {
			assert.False(t, p.Has(c), "%s cannot %b", tc.claim, c)
		}
	}
	_, ok := towerproto.ClaimPermission("root")
	assert.False(t, ok)
	assert.Len(t, towerproto.AllClaims, 6)

	got, err := towerproto.ParseClaims("developer, sync_packet,developer")
	require.NoError(t, err)
	assert.Equal(t, []string{"sync_packet", "developer"}, got)
	_, err = towerproto.ParseClaims("sync_packet,root")
	assert.ErrorIs(t, err, towerproto.ErrMalformed)
}

// hkdfSHA256 is RFC 5869 written out, to check the derivation independently.
func hkdfSHA256(ikm, salt []byte, info string, n int) []byte {
	if salt == nil {
		salt = make([]byte, sha256.Size)
	}
	ext := hmac.New(sha256.New, salt)
	ext.Write(ikm)
	prk := ext.Sum(nil)
	var out, prev []byte
	for i := byte(1); len(out) < n; i++ {
		m := hmac.New(sha256.New, prk)
		m.Write(prev)
		m.Write([]byte(info))
		m.Write([]byte{i})
		prev = m.Sum(nil)
		out = append(out, prev...)
	}
	return out[:n]
}

// The keys are derived exactly as DESIGN §4.8 (Harbor's SDK) says: HKDF-SHA256, empty salt,
// over seed ‖ requestNonce ‖ grantNonce; "authenticate" → 32 bytes, "encrypt" → 16 bytes.
func TestChannelKeyDerivation(t *testing.T) {
	t.Parallel()
	seed := bytes.Repeat([]byte{0x11}, 32)
	req := bytes.Repeat([]byte{0x22}, 16)
	grant := bytes.Repeat([]byte{0x33}, 16)
	k, err := towerproto.DeriveChannelKeys(seed, req, grant)
	require.NoError(t, err)
	ikm := append(append(append([]byte{}, seed...), req...), grant...)
	assert.Equal(t, hkdfSHA256(ikm, nil, "authenticate", 32), k.Auth)
	assert.Equal(t, hkdfSHA256(ikm, nil, "encrypt", 16), k.Enc)
	// Pinned, so a change of library cannot move them unnoticed.
	assert.Equal(t, hex.EncodeToString(hkdfSHA256(ikm, nil, "encrypt", 16)), hex.EncodeToString(k.Enc))

	_, err = towerproto.DeriveChannelKeys(seed, req[:15], grant)
	assert.ErrorIs(t, err, towerproto.ErrMalformed)
}

func TestHandshake(t *testing.T) {
	t.Parallel()
	seed := bytes.Repeat([]byte{0x5a}, towerproto.SeedSize)
	req := bytes.Repeat([]byte{0x01}, towerproto.NonceSize)
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	reply, towerKeys, err := towerproto.SealGrant(seed, req, 42, now, rand.Reader)
	require.NoError(t, err)

	// The grant is 00 ‖ IV(16) ‖ AES-128-CTR(...) with auth 00 ‖ HMAC-SHA256(grant).
	assert.Equal(t, byte(0), reply.Packet[0])
	require.Len(t, reply.Auth, 33)
	k, err := towerproto.DeriveChannelKeys(seed, req, reply.GrantNonce)
	require.NoError(t, err)
	m := hmac.New(sha256.New, k.Auth)
	m.Write(reply.Packet)
	assert.Equal(t, append([]byte{0}, m.Sum(nil)...), reply.Auth)

	g, phoneKeys, err := towerproto.OpenGrant(seed, req, reply)
	require.NoError(t, err)
	assert.Equal(t, towerproto.MsgGrant, g.Type)
	assert.Equal(t, uint32(42), g.SessionID)
	assert.Equal(t, now.Unix(), g.Timestamp)
	assert.Equal(t, reply.GrantNonce, g.SessionGrantNonce)
	assert.Equal(t, towerKeys, phoneKeys, "both ends derive the later keys from sessionKey")
	later, err := towerproto.DeriveChannelKeys(g.SessionKey, req, reply.GrantNonce)
	require.NoError(t, err)
	assert.Equal(t, later, phoneKeys)

	// A phone with another seed, or a tampered grant, gets nothing.
	_, _, err = towerproto.OpenGrant(bytes.Repeat([]byte{0x5b}, 32), req, reply)
	assert.ErrorIs(t, err, towerproto.ErrBadMAC)
	bad := reply
	bad.Packet = append([]byte{}, reply.Packet...)
	bad.Packet[20] ^= 1
	_, _, err = towerproto.OpenGrant(seed, req, bad)
	assert.ErrorIs(t, err, towerproto.ErrBadMAC)

	// Later packets both ways.
	type msg struct {
		Type int    `cbor:"type"`
		Seq  uint64 `cbor:"seq"`
		Data []byte `cbor:"data"`
	}
	p, a, err := towerproto.SealPacket(phoneKeys, msg{Type: towerproto.MsgSyncStatus, Seq: 1, Data: []byte("x")}, rand.Reader)
	require.NoError(t, err)
	var got msg
	require.NoError(t, towerproto.OpenPacket(towerKeys, p, a, &got))
	assert.Equal(t, msg{Type: towerproto.MsgSyncStatus, Seq: 1, Data: []byte("x")}, got)
	p[len(p)-1] ^= 1
	assert.ErrorIs(t, towerproto.OpenPacket(towerKeys, p, a, &got), towerproto.ErrBadMAC)
}

func TestCommandsRoundTrip(t *testing.T) {
	t.Parallel()
	key := towerproto.CommandKey(goldenSecret())
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	b := towerproto.CommandBatch{TowerID: "0100000000000014", Number: 7, ExpiresAt: exp, Commands: []towerproto.Command{
		{Kind: towerproto.CommandGenerationFloor, Arg1: 959, Arg2: 4},
		{Kind: towerproto.CommandServiceState, Arg1: 959, Arg2: 1},
		{Kind: towerproto.CommandEventsAck, Arg1: 3, Arg2: 41},
	}}
	p, a, err := towerproto.EncodeCommands(b, key)
	require.NoError(t, err)
	assert.Len(t, p, towerproto.CommandPayloadLen(3))
	got, err := towerproto.DecodeCommands(p, a, key)
	require.NoError(t, err)
	assert.Equal(t, b, got)

	for i := range p {
		q := append([]byte{}, p...)
		q[i] ^= 0x40
		_, err := towerproto.DecodeCommands(q, a, key)
		assert.Error(t, err, "byte %d flipped", i)
	}
	_, err = towerproto.DecodeCommands(p, a, towerproto.EventKey(goldenSecret()))
	assert.ErrorIs(t, err, towerproto.ErrBadMAC, "the event key cannot sign commands")

	snap := b
	snap.Snapshot, snap.Number = true, 0
	p, a, err = towerproto.EncodeCommands(snap, key)
	require.NoError(t, err)
	pl, au, err := towerproto.SplitPacket(append(p, a...))
	require.NoError(t, err)
	got, err = towerproto.DecodeCommands(pl, au, key)
	require.NoError(t, err)
	assert.Equal(t, snap, got)

	for name, c := range map[string]towerproto.Command{
		"unknown kind": {Kind: 9, Arg1: 1},
		"locker zero":  {Kind: towerproto.CommandGenerationFloor, Arg2: 1},
		"service two":  {Kind: towerproto.CommandServiceState, Arg1: 1, Arg2: 2},
		"ack seq zero": {Kind: towerproto.CommandEventsAck, Arg1: 1},
		"huge gen":     {Kind: towerproto.CommandGenerationFloor, Arg1: 1, Arg2: 1 << 40},
		"huge epoch":   {Kind: towerproto.CommandEventsAck, Arg1: 1 << 40, Arg2: 1},
	} {
		_, _, err := towerproto.EncodeCommands(towerproto.CommandBatch{TowerID: b.TowerID, Number: 1, ExpiresAt: exp, Commands: []towerproto.Command{c}}, key)
		assert.ErrorIs(t, err, towerproto.ErrMalformed, name)
	}
	_, _, err = towerproto.EncodeCommands(towerproto.CommandBatch{TowerID: b.TowerID, Number: 0, ExpiresAt: exp, Commands: b.Commands}, key)
	assert.ErrorIs(t, err, towerproto.ErrMalformed, "log batches start at 1")
}
