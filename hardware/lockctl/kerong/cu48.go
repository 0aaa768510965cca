package kerong

// The CU48 serial protocol (docs/hardware.md has the sources and where they
// disagree): a command is six bytes, STX ADDR LOCK CMD ETX SUM; the board answers
// eighteen, STX ADDR LOCK 75 H1–H6 I1–I6 ETX SUM, to a status read and to an unlock
// alike. ADDR is the board address (0–9; 0A addresses every board), LOCK the lock
// number − 1 (0–47; 00 for a status read), SUM the low byte of the sum of every byte
// before it. H1–H6 hold the hooks of locks 1–48 (bit i of H1 = lock i+1, a set bit
// a latched hook: the door is shut), I1–I6 the sensors in the same layout. The
// frame has no field a board is known to echo unchanged in a status read, so a read
// carries no tag: the driver matches answers by their order (bus.go).
const (
	// CU48CmdStatus reads a board's hooks and sensors; CU48CmdUnlock pulses one lock.
	CU48CmdStatus byte = 0x60
	CU48CmdUnlock byte = 0x61
	// CU48AnswerStatus is the answer's status byte (byte 3) the sources accept.
	CU48AnswerStatus byte = 0x75

	// CU48CommandLen and CU48AnswerLen are the lengths of a CU48 command and answer.
	CU48CommandLen = 6
	CU48AnswerLen  = 18

	// CU48MaxBoard is the highest CU48 board address (0x0A addresses all boards), and
	// CU48MaxLocks the locks of a CU48 board.
	CU48MaxBoard = 9
	CU48MaxLocks = 48
)

type cu48 struct{}

func (cu48) Model() Model    { return ModelCU48 }
func (cu48) Locks() int      { return CU48MaxLocks }
func (cu48) MaxBoard() int   { return CU48MaxBoard }
func (cu48) StatusCmd() byte { return CU48CmdStatus }
func (cu48) UnlockCmd() byte { return CU48CmdUnlock }
func (cu48) Tagged() bool    { return false }
func (cu48) AnswerLen() int  { return CU48AnswerLen }

// EncodeCommand returns a CU48 command's six bytes: Lock is the lock number − 1
// (0–47), zero for a status read.
func (cu48) EncodeCommand(c Command) []byte {
	b := []byte{stx, c.Board, c.Lock, c.Cmd, etx, 0}
	b[5] = sum(b[:5])
	return b
}

func (cu48) DecodeCommand(buf []byte) (Command, int, bool, int) {
	return decode(buf, CU48CommandLen, func(f []byte) Command {
		return Command{Board: f[1], Lock: f[2], Cmd: f[3]}
	})
}

// EncodeAnswer returns a CU48 answer's eighteen bytes (Cmd is not sent: byte 3 is
// always CU48AnswerStatus).
func (cu48) EncodeAnswer(a Answer) []byte {
	b := make([]byte, CU48AnswerLen)
	b[0], b[1], b[2], b[3] = stx, a.Board, a.Lock, CU48AnswerStatus
	for i := range 6 {
		b[4+i] = byte(a.Hooks >> (8 * i))
		b[10+i] = byte(a.Sensors >> (8 * i))
	}
	b[16] = etx
	b[17] = sum(b[:17])
	return b
}

// DecodeAnswer takes only frames whose byte 3 is CU48AnswerStatus, as the sources'
// parsers do; other frames of the same shape are skipped like noise.
func (cu48) DecodeAnswer(buf []byte) (Answer, int, bool, int) {
	return decodeIf(buf, CU48AnswerLen, func(f []byte) bool { return f[3] == CU48AnswerStatus }, func(f []byte) Answer {
		a := Answer{Board: f[1], Lock: f[2], Cmd: f[3]}
		for i := range 6 {
			a.Hooks |= uint64(f[4+i]) << (8 * i)
			a.Sensors |= uint64(f[10+i]) << (8 * i)
		}
		return a
	})
}

// Answered: any frame of the board counts (CU48 answers carry no tag; the bus
// matches them by order). A partial one is the first bytes of a frame of the
// board (STX ADDR LOCK 75…) cut short.
func (cu48) Answered(buf []byte, cmd Command, partial bool) bool {
	for i := 0; i+1 < len(buf); i++ {
		if buf[i] != stx || buf[i+1] != cmd.Board || (i+3 < len(buf) && buf[i+3] != CU48AnswerStatus) {
			continue
		}
		if whole := len(buf)-i >= CU48AnswerLen; whole != partial {
			return true
		}
	}
	return false
}
