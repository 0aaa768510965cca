package towerproto_test

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/towerproto"
)

const (
	goldenBatchPayload = "01" + // version
		"0100000000000014" + // tower id
		"00000003" + // boot epoch 3
		"0000000000000029" + // first seq 41
		"0003" + // 3 events
		// seq 41: token_used at 2030-01-02T03:00:00.123Z, locker 959, token, generation 7, no flags
		"01" + "000001b8e090dbfb" + "00000000000003bf" + "0123456789ab4def8011223344556677" + "00000007" + "00" +
		// seq 42: door_opened, same time
		"02" + "000001b8e090dbfb" + "00000000000003bf" + "0123456789ab4def8011223344556677" + "00000007" + "00" +
		// seq 43: door_closed 1.5 s later, item inside
		"03" + "000001b8e090e1d7" + "00000000000003bf" + "0123456789ab4def8011223344556677" + "00000007" + "01"
	goldenBatchAuth = "00918d1ecbae3531134f28e854f7270f895e38c628bc06348f90461a8f93e8b331"
)

func goldenBatch() towerproto.Batch {
	tok := goldenToken().ID
	at := time.Date(2030, 1, 2, 3, 0, 0, 123e6, time.UTC)
	return towerproto.Batch{
		TowerID:   "0100000000000014",
		BootEpoch: 3,
		Events: []towerproto.Event{
			{Seq: 41, Kind: towerproto.EventTokenUsed, At: at, LockerID: 959, TokenID: tok, Generation: 7},
			{Seq: 42, Kind: towerproto.EventDoorOpened, At: at, LockerID: 959, TokenID: tok, Generation: 7},
			{Seq: 43, Kind: towerproto.EventDoorClosed, At: at.Add(1500 * time.Millisecond), LockerID: 959, TokenID: tok, Generation: 7, ItemInside: true},
		},
	}
}

func goldenEnvelope() towerproto.BatchEnvelope {
	return towerproto.BatchEnvelope{SyncEventStart: 41, SyncEventCount: 3, Payload: goldenBatchPayload, PayloadAuth: goldenBatchAuth}
}

func TestEncodeBatchGolden(t *testing.T) {
	t.Parallel()
	env, err := towerproto.EncodeBatch(goldenBatch(), towerproto.EventKey(goldenSecret()))
	require.NoError(t, err)
	assert.Equal(t, goldenEnvelope(), env)

	// The JSON field names are part of the upload contract (DESIGN §4.7).
	raw, err := json.Marshal(env)
	require.NoError(t, err)
	assert.JSONEq(t, `{"syncEventStart":41,"syncEventCount":3,"payload":"`+goldenBatchPayload+`","payloadAuth":"`+goldenBatchAuth+`"}`, string(raw))
}

func TestDecodeBatchGolden(t *testing.T) {
	t.Parallel()
	got, err := towerproto.DecodeBatch(goldenEnvelope(), towerproto.EventKey(goldenSecret()))
	require.NoError(t, err)
	assert.Equal(t, goldenBatch(), got)

	tower, err := towerproto.PeekBatchTower(goldenEnvelope())
	require.NoError(t, err)
	assert.Equal(t, "0100000000000014", tower)
}

func TestBatchRoundTrip(t *testing.T) {
	t.Parallel()
	key := towerproto.EventKey([]byte("round-trip secret"))
	at := time.Date(2031, 7, 8, 9, 10, 11, 0, time.UTC)
	many := make([]towerproto.Event, 500)
	for i := range many {
		many[i] = towerproto.Event{Seq: uint64(i + 1), Kind: towerproto.EventKind(i%3 + 1), At: at.Add(time.Duration(i) * time.Millisecond), LockerID: int64(i + 1)}
	}
	tests := []struct {
		name  string
		batch towerproto.Batch
	}{
		{"one door event without a token", towerproto.Batch{TowerID: "ffffffffffffffff", BootEpoch: 1, Events: []towerproto.Event{
			{Seq: 1, Kind: towerproto.EventDoorClosed, At: at, LockerID: 1},
		}}},
		{"extreme numbers", towerproto.Batch{TowerID: "0000000000000000", BootEpoch: math.MaxUint32, Events: []towerproto.Event{
			{Seq: math.MaxUint64 - 1, Kind: towerproto.EventTokenUsed, At: time.UnixMilli(-1).UTC(), LockerID: math.MaxInt64, Generation: math.MaxUint32, TokenID: [16]byte{0xff}},
			{Seq: math.MaxUint64, Kind: towerproto.EventDoorClosed, At: time.UnixMilli(math.MaxInt64).UTC(), LockerID: 1, ItemInside: true},
		}}},
		{"500 events", towerproto.Batch{TowerID: "0100000000000014", BootEpoch: 9, Events: many}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env, err := towerproto.EncodeBatch(tc.batch, key)
			require.NoError(t, err)
			assert.Equal(t, tc.batch.Events[0].Seq, env.SyncEventStart)
			assert.Equal(t, len(tc.batch.Events), env.SyncEventCount)
			assert.Len(t, env.Payload, 2*towerproto.BatchPayloadLen(len(tc.batch.Events)))

			got, err := towerproto.DecodeBatch(env, key)
			require.NoError(t, err)
			assert.Equal(t, tc.batch, got)
		})
	}

	t.Run("times are truncated to the millisecond and returned in UTC", func(t *testing.T) {
		t.Parallel()
		in := towerproto.Batch{TowerID: "ABCDEF0123456789", BootEpoch: 2, Events: []towerproto.Event{
			{Seq: 5, Kind: towerproto.EventDoorOpened, At: at.Add(1234567 * time.Nanosecond).In(time.FixedZone("X", 3600)), LockerID: 4},
		}}
		env, err := towerproto.EncodeBatch(in, key)
		require.NoError(t, err)
		got, err := towerproto.DecodeBatch(env, key)
		require.NoError(t, err)
		assert.Equal(t, "abcdef0123456789", got.TowerID)
		assert.Equal(t, at.Add(time.Millisecond), got.Events[0].At)
	})
}

func TestDecodeBatchTamperedIsBadMAC(t *testing.T) {
	t.Parallel()
	key := towerproto.EventKey(goldenSecret())
	for i := 0; i < len(goldenBatchPayload)/2; i++ {
		if i == 21 || i == 22 {
			// The event count: flipping it breaks the length check first (ErrMalformed),
			// tested below.
			continue
		}
		env := goldenEnvelope()
		env.Payload = flipHexByte(t, env.Payload, i)
		_, err := towerproto.DecodeBatch(env, key)
		assert.ErrorIs(t, err, towerproto.ErrBadMAC, "payload byte %d flipped", i)
	}
	for i := 0; i < len(goldenBatchAuth)/2; i++ {
		env := goldenEnvelope()
		env.PayloadAuth = flipHexByte(t, env.PayloadAuth, i)
		_, err := towerproto.DecodeBatch(env, key)
		assert.ErrorIs(t, err, towerproto.ErrBadMAC, "auth byte %d flipped", i)
	}
	_, err := towerproto.DecodeBatch(goldenEnvelope(), towerproto.TokenKey(goldenSecret()))
	assert.ErrorIs(t, err, towerproto.ErrBadMAC, "the token key of the same tower")
}

func TestDecodeBatchMalformed(t *testing.T) {
	t.Parallel()
	key := towerproto.EventKey(goldenSecret())
	tests := []struct {
		name   string
		modify func(*towerproto.BatchEnvelope)
	}{
		{"empty payload", func(e *towerproto.BatchEnvelope) { e.Payload = "" }},
		{"empty auth", func(e *towerproto.BatchEnvelope) { e.PayloadAuth = "" }},
		{"odd-length payload", func(e *towerproto.BatchEnvelope) { e.Payload = e.Payload[1:] }},
		{"payload truncated by one byte", func(e *towerproto.BatchEnvelope) { e.Payload = e.Payload[:len(e.Payload)-2] }},
		{"payload truncated to the header", func(e *towerproto.BatchEnvelope) { e.Payload = e.Payload[:2*23] }},
		{"payload shorter than a header", func(e *towerproto.BatchEnvelope) { e.Payload = e.Payload[:20] }},
		{"payload with an extra byte", func(e *towerproto.BatchEnvelope) { e.Payload += "00" }},
		{"count says 4 events", func(e *towerproto.BatchEnvelope) { e.Payload = e.Payload[:42] + "0004" + e.Payload[46:] }},
		{"0x prefix", func(e *towerproto.BatchEnvelope) { e.Payload = "0x" + e.Payload }},
		{"whitespace in auth", func(e *towerproto.BatchEnvelope) { e.PayloadAuth = " " + e.PayloadAuth[1:] }},
		{"garbage payload", func(e *towerproto.BatchEnvelope) { e.Payload = "{\"events\": []}" }},
		{"auth truncated", func(e *towerproto.BatchEnvelope) { e.PayloadAuth = e.PayloadAuth[:64] }},
		{"envelope start differs", func(e *towerproto.BatchEnvelope) { e.SyncEventStart = 40 }},
		{"envelope count differs", func(e *towerproto.BatchEnvelope) { e.SyncEventCount = 2 }},
		{"envelope count negative", func(e *towerproto.BatchEnvelope) { e.SyncEventCount = -3 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := goldenEnvelope()
			tc.modify(&env)
			_, err := towerproto.DecodeBatch(env, key)
			assert.ErrorIs(t, err, towerproto.ErrMalformed)
			assert.NotErrorIs(t, err, towerproto.ErrBadMAC)
		})
	}
}

func TestDecodeBatchSignedButInvalid(t *testing.T) {
	t.Parallel()
	key := towerproto.EventKey(goldenSecret())
	golden, err := hex.DecodeString(goldenBatchPayload)
	require.NoError(t, err)
	tests := []struct {
		name    string
		payload func() []byte
		start   uint64
		count   int
		wantErr error
	}{
		{"unknown payload version", func() []byte { p := clone(golden); p[0] = 0x02; return p }, 41, 3, towerproto.ErrVersion},
		{"no events, envelope start differs", func() []byte { p := clone(golden[:23]); p[22] = 0; return p }, 40, 0, towerproto.ErrMalformed},
		{"first seq zero", func() []byte { p := clone(golden); clear(p[13:21]); return p }, 0, 3, towerproto.ErrMalformed},
		{"seqs overflow", func() []byte {
			p := clone(golden)
			binary.BigEndian.PutUint64(p[13:], math.MaxUint64-1)
			return p
		}, math.MaxUint64 - 1, 3, towerproto.ErrMalformed},
		{"kind zero", func() []byte { p := clone(golden); p[23] = 0; return p }, 41, 3, towerproto.ErrMalformed},
		{"kind five", func() []byte { p := clone(golden); p[23+38] = 5; return p }, 41, 3, towerproto.ErrMalformed},
		{"sync_commands naming a token", func() []byte { p := clone(golden); p[23+38] = 4; return p }, 41, 3, towerproto.ErrMalformed},
		{"sync_commands with command zero", func() []byte {
			p := clone(golden[:23+38])
			p[22] = 1
			q := p[23:]
			q[0] = 4
			clear(q[9:])
			return p
		}, 41, 1, towerproto.ErrMalformed},
		{"locker zero", func() []byte { p := clone(golden); clear(p[23+9 : 23+17]); return p }, 41, 3, towerproto.ErrMalformed},
		{"unknown flag", func() []byte { p := clone(golden); p[len(p)-1] = 0x03; return p }, 41, 3, towerproto.ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.payload()
			env := towerproto.BatchEnvelope{SyncEventStart: tc.start, SyncEventCount: tc.count, Payload: hex.EncodeToString(p), PayloadAuth: signHex(key, p)}
			_, err := towerproto.DecodeBatch(env, key)
			assert.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestEncodeBatchRefusesInvalid(t *testing.T) {
	t.Parallel()
	key := towerproto.EventKey(goldenSecret())
	tests := []struct {
		name   string
		modify func(*towerproto.Batch)
	}{
		{"bad tower id", func(b *towerproto.Batch) { b.TowerID = "tower-1" }},
		{"sync_commands without a command number", func(b *towerproto.Batch) {
			b.Events = b.Events[:1]
			b.Events[0] = towerproto.Event{Seq: 41, Kind: towerproto.EventSyncCommands, At: b.Events[0].At}
		}},
		{"sync_commands naming a locker", func(b *towerproto.Batch) {
			b.Events = b.Events[:1]
			b.Events[0] = towerproto.Event{Seq: 41, Kind: towerproto.EventSyncCommands, At: b.Events[0].At, Command: 3, LockerID: 2}
		}},
		{"door event with a command number", func(b *towerproto.Batch) { b.Events[1].Command = 9 }},
		{"gap in seqs", func(b *towerproto.Batch) { b.Events[2].Seq = 44 }},
		{"seqs out of order", func(b *towerproto.Batch) { b.Events[0].Seq, b.Events[1].Seq = 42, 41 }},
		{"seq zero", func(b *towerproto.Batch) { b.Events = b.Events[:1]; b.Events[0].Seq = 0 }},
		{"seqs overflow", func(b *towerproto.Batch) {
			for i := range b.Events {
				b.Events[i].Seq = math.MaxUint64 - 1 + uint64(i)
			}
		}},
		{"unknown kind", func(b *towerproto.Batch) { b.Events[1].Kind = 7 }},
		{"locker zero", func(b *towerproto.Batch) { b.Events[1].LockerID = 0 }},
		{"no time", func(b *towerproto.Batch) { b.Events[1].At = time.Time{} }},
		{"too many events", func(b *towerproto.Batch) {
			b.Events = make([]towerproto.Event, towerproto.MaxBatchEvents+1)
			for i := range b.Events {
				b.Events[i] = towerproto.Event{Seq: uint64(i + 1), Kind: towerproto.EventDoorOpened, At: time.Unix(1, 0), LockerID: 1}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := goldenBatch()
			tc.modify(&b)
			_, err := towerproto.EncodeBatch(b, key)
			assert.ErrorIs(t, err, towerproto.ErrMalformed)
		})
	}

	_, err := towerproto.EncodeBatch(goldenBatch(), []byte("raw secret"))
	assert.ErrorIs(t, err, towerproto.ErrKey)
}

func TestPeekBatchTower(t *testing.T) {
	t.Parallel()
	_, err := towerproto.PeekBatchTower(towerproto.BatchEnvelope{Payload: "01abc"})
	assert.ErrorIs(t, err, towerproto.ErrMalformed)
	_, err = towerproto.PeekBatchTower(towerproto.BatchEnvelope{Payload: "02" + goldenBatchPayload[2:]})
	assert.ErrorIs(t, err, towerproto.ErrVersion)
}

func TestEventKindNames(t *testing.T) {
	t.Parallel()
	checkNames(t, map[towerproto.EventKind]string{
		towerproto.EventTokenUsed:    "token_used",
		towerproto.EventDoorOpened:   "door_opened",
		towerproto.EventDoorClosed:   "door_closed",
		towerproto.EventSyncCommands: "sync_commands",
	}, towerproto.ParseEventKind)
	assert.Equal(t, "EventKind(0)", towerproto.EventKind(0).String())
	_, err := towerproto.ParseEventKind("door_slammed")
	assert.ErrorIs(t, err, towerproto.ErrMalformed)
}

// Harbor's SDKs write hex upper-case (DESIGN §4.8): the same bytes, so the same batch.
func TestDecodeBatchEitherCase(t *testing.T) {
	t.Parallel()
	key := towerproto.EventKey(goldenSecret())
	for _, tc := range []struct{ name, payload, auth string }{
		{"upper-case", strings.ToUpper(goldenBatchPayload), strings.ToUpper(goldenBatchAuth)},
		{"mixed case", strings.ToUpper(goldenBatchPayload[:30]) + goldenBatchPayload[30:], goldenBatchAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := goldenEnvelope()
			env.Payload, env.PayloadAuth = tc.payload, tc.auth
			got, err := towerproto.DecodeBatch(env, key)
			require.NoError(t, err)
			assert.Equal(t, goldenBatch(), got)
			tower, err := towerproto.PeekBatchTower(env)
			require.NoError(t, err)
			assert.Equal(t, "0100000000000014", tower, "tower ids come back lower-case")
		})
	}
}

// A tower answers a pull from an empty log with a signed batch of no events; the SDK uploads
// it all the same.
func TestEmptyBatch(t *testing.T) {
	t.Parallel()
	key := towerproto.EventKey(goldenSecret())
	env, err := towerproto.EncodeBatch(towerproto.Batch{TowerID: "0100000000000014", BootEpoch: 3, Start: 44}, key)
	require.NoError(t, err)
	assert.Equal(t, uint64(44), env.SyncEventStart)
	assert.Zero(t, env.SyncEventCount)
	assert.Len(t, env.Payload, 2*towerproto.BatchPayloadLen(0))

	got, err := towerproto.DecodeBatch(env, key)
	require.NoError(t, err)
	assert.Empty(t, got.Events)
	assert.Equal(t, uint64(44), got.Start)
	assert.Equal(t, uint32(3), got.BootEpoch)

	env.SyncEventStart = 0 // some SDK builds send no start for an empty pull
	_, err = towerproto.DecodeBatch(env, key)
	require.NoError(t, err)

	env.Payload = flipHexByte(t, env.Payload, 10)
	_, err = towerproto.DecodeBatch(env, key)
	assert.ErrorIs(t, err, towerproto.ErrBadMAC, "an empty batch is signed too")
}

func TestSyncCommandsEventRoundTrip(t *testing.T) {
	t.Parallel()
	key := towerproto.EventKey(goldenSecret())
	at := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	b := towerproto.Batch{TowerID: "0100000000000014", BootEpoch: 1, Events: []towerproto.Event{
		{Seq: 7, Kind: towerproto.EventSyncCommands, At: at, Command: 12},
		{Seq: 8, Kind: towerproto.EventDoorOpened, At: at, LockerID: 3},
	}}
	env, err := towerproto.EncodeBatch(b, key)
	require.NoError(t, err)
	got, err := towerproto.DecodeBatch(env, key)
	require.NoError(t, err)
	assert.Equal(t, b, got)
}
