package towerproto_test

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/towerproto"
)

// Under plain `go test` the fuzz targets run their seed corpus; run them for real with
//
//	go test -run '^$' -fuzz FuzzDecodeToken -fuzztime 30s ./internal/towerproto/
//	go test -run '^$' -fuzz FuzzDecodeBatch -fuzztime 30s ./internal/towerproto/
//	go test -run '^$' -fuzz FuzzOpenSession -fuzztime 30s ./internal/towerproto/
//	go test -run '^$' -fuzz FuzzDecodeCommands -fuzztime 30s ./internal/towerproto/
//
// Random bytes almost never carry a valid MAC, so each target also signs the fuzzed raw
// bytes itself: that drives the field parsing behind the MAC check, the part a compromised
// or buggy issuer could reach.

// FuzzDecodeToken checks that DecodeToken and PeekTokenTower never panic, only fail with
// the package's sentinel errors, and that anything accepted re-encodes to the same bytes
// (one token, one spelling).
func FuzzDecodeToken(f *testing.F) {
	f.Add(goldenTokenPayload, goldenTokenAuth, mustHex(f, goldenTokenPayload))
	f.Add("", "", []byte{})
	f.Add("01", "00", []byte{0x01})
	f.Add(goldenTokenPayload[:len(goldenTokenPayload)-2], goldenTokenAuth, mustHex(f, goldenTokenPayload)[:10])
	f.Add("0x00", "ZZ", []byte{0x02, 0x00})
	key := towerproto.TokenKey(goldenSecret())

	f.Fuzz(func(t *testing.T, payloadHex, authHex string, raw []byte) {
		_, err := towerproto.DecodeToken(payloadHex, authHex, key)
		requireSentinel(t, err)
		_, err = towerproto.PeekTokenTower(payloadHex)
		requireSentinel(t, err)

		p := hex.EncodeToString(raw)
		a := signHex(key, raw)
		tok, err := towerproto.DecodeToken(p, a, key)
		requireSentinel(t, err)
		if err != nil {
			assert.NotErrorIs(t, err, towerproto.ErrBadMAC, "a correctly signed payload")
			return
		}
		p2, a2, err := towerproto.EncodeToken(tok, key)
		require.NoError(t, err)
		assert.Equal(t, p, p2)
		assert.Equal(t, a, a2)
	})
}

// FuzzDecodeBatch is FuzzDecodeToken for event batches.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(goldenBatchPayload, goldenBatchAuth, uint64(41), 3, mustHex(f, goldenBatchPayload))
	f.Add("", "", uint64(0), 0, []byte{})
	f.Add("01", "00", uint64(1), 1, []byte{0x01})
	f.Add(goldenBatchPayload[:46], goldenBatchAuth, uint64(41), 0, mustHex(f, goldenBatchPayload)[:23])
	f.Add(goldenBatchPayload, goldenBatchAuth, uint64(1), -1, []byte{0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	key := towerproto.EventKey(goldenSecret())

	f.Fuzz(func(t *testing.T, payloadHex, authHex string, start uint64, count int, raw []byte) {
		env := towerproto.BatchEnvelope{SyncEventStart: start, SyncEventCount: count, Payload: payloadHex, PayloadAuth: authHex}
		_, err := towerproto.DecodeBatch(env, key)
		requireSentinel(t, err)
		_, err = towerproto.PeekBatchTower(env)
		requireSentinel(t, err)

		env = towerproto.BatchEnvelope{SyncEventStart: start, SyncEventCount: count, Payload: hex.EncodeToString(raw), PayloadAuth: signHex(key, raw)}
		if len(raw) >= 23 {
			// Let the envelope agree with the payload half of the time.
			if start%2 == 0 {
				env.SyncEventStart = uint64(raw[13])<<56 | uint64(raw[14])<<48 | uint64(raw[15])<<40 | uint64(raw[16])<<32 |
					uint64(raw[17])<<24 | uint64(raw[18])<<16 | uint64(raw[19])<<8 | uint64(raw[20])
				env.SyncEventCount = int(raw[21])<<8 | int(raw[22])
			}
		}
		b, err := towerproto.DecodeBatch(env, key)
		requireSentinel(t, err)
		if err != nil {
			assert.NotErrorIs(t, err, towerproto.ErrBadMAC, "a correctly signed payload")
			return
		}
		again, err := towerproto.EncodeBatch(b, key)
		require.NoError(t, err)
		if env.SyncEventCount == 0 && env.SyncEventStart == 0 {
			env.SyncEventStart = b.Start // an empty pull may leave the envelope's start out
		}
		assert.Equal(t, env, again)
	})
}

// FuzzOpenSession checks that OpenSession never panics and fails only with the sentinels.
func FuzzOpenSession(f *testing.F) {
	f.Add("", "", []byte{})
	f.Add("01", "00", []byte{0x01})
	f.Add("0101000000000000140102030405060708090a0b0c", "00112233445566778899aabbccddeeff00", []byte{0x01, 0xa1})
	key := towerproto.SessionKey(goldenSecret())
	f.Fuzz(func(t *testing.T, payloadHex, authHex string, raw []byte) {
		_, err := towerproto.OpenSession(payloadHex, authHex, key)
		requireSentinel(t, err)
		_, err = towerproto.PeekSessionTower(payloadHex)
		requireSentinel(t, err)
		_, err = towerproto.OpenSession(hex.EncodeToString(raw), authHex, key)
		requireSentinel(t, err)
	})
}

// FuzzDecodeCommands signs the fuzzed bytes, so the parsing behind the MAC is reached.
func FuzzDecodeCommands(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x01, 0x00, 1, 0, 0, 0, 0, 0, 0, 0x14, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0x70, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	key := towerproto.CommandKey(goldenSecret())
	f.Fuzz(func(t *testing.T, raw []byte) {
		auth := mustHex(t, signHex(key, raw))
		b, err := towerproto.DecodeCommands(raw, auth, key)
		requireSentinel(t, err)
		if err != nil {
			return
		}
		p, a, err := towerproto.EncodeCommands(b, key)
		require.NoError(t, err)
		assert.Equal(t, raw, p)
		assert.Equal(t, auth, a)
	})
}

func requireSentinel(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !errors.Is(err, towerproto.ErrMalformed) && !errors.Is(err, towerproto.ErrBadMAC) && !errors.Is(err, towerproto.ErrVersion) {
		t.Fatalf("error %v wraps none of the sentinels", err)
	}
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(tb, err)
	return b
}
