package kerong

// The CU16 serial protocol (docs/hardware.md has the sources): a command is five
// bytes, STX ADDR CMD ETX SUM; the board answers nine, STX ADDR CMD H1 H2 I1 I2 ETX SUM.
// ADDR carries the board address (DIP switches, 0–15) in its high nibble and the lock
// number (0–15) in its low nibble. SUM is the low byte of the sum of every byte before
// it. H1/H2 are the lock hooks of locks 1–8 and 9–16 (bit i of H1 = lock i+1; a set bit
// is a hook that is latched: the door is shut), I1/I2 the infrared item sensors in the
// same layout (a set bit sees an item).
const (
	// CU16CmdStatus reads a board's hooks and sensors. The board does not use the lock
	// nibble and echoes it: the driver puts the read's tag there.
	CU16CmdStatus byte = 0x30
	// CU16CmdUnlock pulses one lock; the board answers its status after the pulse.
	CU16CmdUnlock byte = 0x31

	// CU16CommandLen and CU16AnswerLen are the lengths of a command and of an answer.
	CU16CommandLen = 5
	CU16AnswerLen  = 9

	// CU16MaxBoard is the highest board address of a bus, CU16MaxLocks the locks of a board.
	CU16MaxBoard = 15
	CU16MaxLocks = 16
)

type cu16 struct{}

func (cu16) Model() Model    { return ModelCU16 }
func (cu16) Locks() int      { return CU16MaxLocks }
func (cu16) MaxBoard() int   { return CU16MaxBoard }
func (cu16) StatusCmd() byte { return CU16CmdStatus }
func (cu16) UnlockCmd() byte { return CU16CmdUnlock }
func (cu16) Tagged() bool    { return true }
func (cu16) AnswerLen() int  { return CU16AnswerLen }

// Answered: a CU16 answer names the awaited frame (its tag); a partial one is not
// taken for an answer (the frame stays pending until a later answer settles it).
func (cu16) Answered(buf []byte, cmd Command, partial bool) bool {
	return !partial && corruptAnswer(buf, cmd)
}

// EncodeCommand returns a CU16 command's five bytes.
func (cu16) EncodeCommand(c Command) []byte {
	b := []byte{stx, c.Board<<4 | c.Lock&0x0F, c.Cmd, etx, 0}
	b[4] = sum(b[:4])
	return b
}

// EncodeAnswer returns a CU16 answer's nine bytes.
func (cu16) EncodeAnswer(a Answer) []byte {
	b := []byte{stx, a.Board<<4 | a.Lock&0x0F, a.Cmd,
		byte(a.Hooks), byte(a.Hooks >> 8), byte(a.Sensors), byte(a.Sensors >> 8), etx, 0}
	b[8] = sum(b[:8])
	return b
}

// DecodeAnswer finds the first valid CU16 answer in buf. It returns the answer and how
// many bytes of buf it used up (noise before it included); when buf holds no
// valid answer yet, ok is false and skip is how many leading bytes can never
// start one (noise, or a start byte whose frame failed its end byte or checksum),
// so a caller drops them and waits for more. It never reads past buf.
func (cu16) DecodeAnswer(buf []byte) (a Answer, used int, ok bool, skip int) {
	return decode(buf, CU16AnswerLen, func(f []byte) Answer {
		return Answer{Board: f[1] >> 4, Lock: f[1] & 0x0F, Cmd: f[2],
			Hooks: uint64(f[3]) | uint64(f[4])<<8, Sensors: uint64(f[5]) | uint64(f[6])<<8}
	})
}

// DecodeCommand is DecodeAnswer for the five-byte commands (what a board reads).
func (cu16) DecodeCommand(buf []byte) (c Command, used int, ok bool, skip int) {
	return decode(buf, CU16CommandLen, func(f []byte) Command {
		return Command{Board: f[1] >> 4, Lock: f[1] & 0x0F, Cmd: f[2]}
	})
}
