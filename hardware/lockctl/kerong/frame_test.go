package kerong

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFrames(t *testing.T) {
	t.Parallel()
	// Board 0, lock 1 status read, and an unlock of board 1 lock 3: the checksum is
	// the low byte of the sum of the bytes before it.
	assert.Equal(t, []byte{0x02, 0x00, 0x30, 0x03, 0x35}, Command{Cmd: CmdStatus}.Encode())
	assert.Equal(t, []byte{0x02, 0x12, 0x31, 0x03, 0x48}, Command{Board: 1, Lock: 2, Cmd: CmdUnlock}.Encode())

	a := Answer{Board: 1, Lock: 2, Cmd: CmdUnlock, Hooks: 0xFFFB, Sensors: 0x0100}
	enc := a.Encode()
	assert.Equal(t, []byte{0x02, 0x12, 0x31, 0xFB, 0xFF, 0x00, 0x01, 0x03, 0x43}, enc)
	assert.False(t, a.Latched(3))
	assert.True(t, a.Latched(16))
	assert.True(t, a.ItemInside(9))

	// Noise before the frame, a stray start byte, and the frame split in two.
	buf := append([]byte{0xFF, 0x02, 0x13, 0x55}, enc[:5]...)
	_, _, ok, skip := DecodeAnswer(buf)
	require.False(t, ok)
	buf = append(buf[skip:], enc[5:]...)
	got, used, ok, _ := DecodeAnswer(buf)
	require.True(t, ok)
	assert.Equal(t, a, got)
	assert.Equal(t, len(buf), used)

	// A damaged checksum is never taken for a frame.
	bad := bytes.Clone(enc)
	bad[8]++
	_, _, ok, skip = DecodeAnswer(bad)
	assert.False(t, ok)
	assert.Equal(t, len(bad), skip)
}

// FuzzDecodeAnswer: the decoder never panics, never reads past its input, and
// whatever it accepts re-encodes to the bytes it consumed.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add(Answer{Board: 1, Lock: 2, Cmd: CmdUnlock, Hooks: 0xFFFB}.Encode())
	f.Add(append([]byte{0x00, 0x02, 0x02}, Answer{Cmd: CmdStatus}.Encode()...))
	f.Add([]byte{0x02, 0x12, 0x31, 0xFB})
	f.Add([]byte{0x02, 0x00, 0x30, 0x03, 0x35})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, buf []byte) {
		a, used, ok, skip := DecodeAnswer(buf)
		if !ok {
			if skip < 0 || skip > len(buf) {
				t.Fatalf("skip %d of %d bytes", skip, len(buf))
			}
			return
		}
		if used < AnswerLen || used > len(buf) {
			t.Fatalf("used %d of %d bytes", used, len(buf))
		}
		if !bytes.Equal(a.Encode(), buf[used-AnswerLen:used]) {
			t.Fatalf("%x decoded to %+v, which encodes to %x", buf[used-AnswerLen:used], a, a.Encode())
		}
		c, cused, cok, cskip := DecodeCommand(buf)
		if cok && !bytes.Equal(c.Encode(), buf[cused-CommandLen:cused]) {
			t.Fatalf("command %x decoded to %+v", buf[cused-CommandLen:cused], c)
		}
		if !cok && (cskip < 0 || cskip > len(buf)) {
			t.Fatalf("command skip %d of %d bytes", cskip, len(buf))
		}
	})
}
