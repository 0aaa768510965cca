package kerong

// The CU16 serial protocol (docs/hardware.md has the sources): a command is five
// bytes, STX ADDR CMD ETX SUM; the board answers nine, STX ADDR CMD H1 H2 I1 I2 ETX SUM.
// ADDR carries the board address (DIP switches, 0–15) in its high nibble and the lock
// number (0–15) in its low nibble. SUM is the low byte of the sum of every byte before
// it. H1/H2 are the lock hooks of locks 1–8 and 9–16 (bit i of H1 = lock i+1; a set bit
// is a hook that is latched: the door is shut), I1/I2 the infrared item sensors in the
// same layout (a set bit sees an item).
const (
	stx = 0x02
	etx = 0x03

	// CmdStatus reads a board's hooks and sensors. The board does not use the lock
	// nibble and echoes it: the driver puts the read's tag there.
	CmdStatus byte = 0x30
	// CmdUnlock pulses one lock; the board answers its status after the pulse.
	CmdUnlock byte = 0x31

	// CommandLen and AnswerLen are the lengths of a command and of an answer.
	CommandLen = 5
	AnswerLen  = 9

	// MaxBoard is the highest board address of a bus, MaxLocks the locks of a board.
	MaxBoard = 15
	MaxLocks = 16
)

// Command is a frame from the gateway to a board.
type Command struct {
	Board byte // 0–15
	Lock  byte // 0–15 (lock number − 1)
	Cmd   byte
}

// Encode returns the command's five bytes.
func (c Command) Encode() []byte {
	b := []byte{stx, c.Board<<4 | c.Lock&0x0F, c.Cmd, etx, 0}
	b[4] = sum(b[:4])
	return b
}

// Answer is a board's status frame: its answer to a status read or to an unlock.
type Answer struct {
	Board, Lock, Cmd byte
	// Hooks and Sensors hold locks 1–16 (CU16) or 1–48 (CU48) in bits 0–15 or 0–47.
	Hooks, Sensors uint64
}

// Encode returns the answer's nine bytes.
func (a Answer) Encode() []byte {
	b := []byte{stx, a.Board<<4 | a.Lock&0x0F, a.Cmd,
		byte(a.Hooks), byte(a.Hooks >> 8), byte(a.Sensors), byte(a.Sensors >> 8), etx, 0}
	b[8] = sum(b[:8])
	return b
}

// Latched reports whether lock n (1–16, or 1–48 on a CU48) reads shut.
func (a Answer) Latched(n int) bool { return a.Hooks&(1<<(n-1)) != 0 }

// ItemInside reports whether the sensor of lock n (1–16, or 1–48 on a CU48) sees an item.
func (a Answer) ItemInside(n int) bool { return a.Sensors&(1<<(n-1)) != 0 }

func sum(b []byte) byte {
	var s byte
	for _, c := range b {
		s += c
	}
	return s
}

// DecodeAnswer finds the first valid answer in buf. It returns the answer and how
// many bytes of buf it used up (noise before it included); when buf holds no
// valid answer yet, ok is false and skip is how many leading bytes can never
// start one (noise, or a start byte whose frame failed its end byte or checksum),
// so a caller drops them and waits for more. It never reads past buf.
func DecodeAnswer(buf []byte) (a Answer, used int, ok bool, skip int) {
	return decode(buf, AnswerLen, func(f []byte) Answer {
		return Answer{Board: f[1] >> 4, Lock: f[1] & 0x0F, Cmd: f[2],
			Hooks: uint64(f[3]) | uint64(f[4])<<8, Sensors: uint64(f[5]) | uint64(f[6])<<8}
	})
}

// DecodeCommand is DecodeAnswer for the five-byte commands (what a board reads).
func DecodeCommand(buf []byte) (c Command, used int, ok bool, skip int) {
	return decode(buf, CommandLen, func(f []byte) Command {
		return Command{Board: f[1] >> 4, Lock: f[1] & 0x0F, Cmd: f[2]}
	})
}

func decode[T any](buf []byte, n int, parse func([]byte) T) (v T, used int, ok bool, skip int) {
	return decodeIf(buf, n, nil, parse)
}

// decodeIf is decode with a further check of a whole frame (nil: none).
func decodeIf[T any](buf []byte, n int, valid func([]byte) bool, parse func([]byte) T) (v T, used int, ok bool, skip int) {
	for i := 0; i < len(buf); i++ {
		if buf[i] != stx {
			continue
		}
		if len(buf)-i < n {
			// A frame may be starting here: keep it and what follows.
			return v, 0, false, i
		}
		f := buf[i : i+n]
		if f[n-2] == etx && f[n-1] == sum(f[:n-1]) && (valid == nil || valid(f)) {
			return parse(f), i + n, true, 0
		}
	}
	return v, 0, false, len(buf)
}
