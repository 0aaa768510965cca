package kerong

import "fmt"

// Model is a family of Kerong boards; each speaks its own frames.
type Model string

// Models.
const (
	ModelCU16 Model = "cu16"
	ModelCU48 Model = "cu48"
)

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
	// Cmd48Status reads a board's hooks and sensors; Cmd48Unlock pulses one lock.
	Cmd48Status byte = 0x60
	Cmd48Unlock byte = 0x61
	// Answer48Status is the answer's status byte (byte 3) the sources accept.
	Answer48Status byte = 0x75

	// Command48Len and Answer48Len are the lengths of a CU48 command and answer.
	Command48Len = 6
	Answer48Len  = 18

	// MaxBoard48 is the highest CU48 board address (0x0A addresses all boards), and
	// MaxLocks48 the locks of a CU48 board.
	MaxBoard48 = 9
	MaxLocks48 = 48
)

// Codec is one model's frames: what the bus writes and how it reads answers.
type Codec interface {
	Model() Model
	// Locks is the number of locks of a board, MaxBoard its highest address.
	Locks() int
	MaxBoard() int
	// StatusCmd and UnlockCmd are the command bytes of a status read and an unlock.
	StatusCmd() byte
	UnlockCmd() byte
	// Tagged reports whether a status read carries a tag its answer echoes.
	Tagged() bool
	// AnswerLen is the length of an answer.
	AnswerLen() int
	EncodeCommand(Command) []byte
	// DecodeCommand and DecodeAnswer find the first valid frame in buf, as
	// DecodeAnswer does for the CU16.
	DecodeCommand(buf []byte) (c Command, used int, ok bool, skip int)
	EncodeAnswer(Answer) []byte
	DecodeAnswer(buf []byte) (a Answer, used int, ok bool, skip int)
	// Answered reports whether buf holds the start of an answer of board to cmd
	// (the awaited frame, for a tagged codec) that is damaged: a whole frame that
	// fails its end byte or checksum (partial false), or, when partial, the first
	// bytes of one with nothing after them.
	Answered(buf []byte, cmd Command, partial bool) bool
}

// CodecOf returns the codec of a model.
func CodecOf(m Model) (Codec, error) {
	switch m {
	case ModelCU16:
		return CU16, nil
	case ModelCU48:
		return CU48, nil
	}
	return nil, fmt.Errorf("model %q: want cu16 or cu48", m)
}

// CU16 and CU48 are the codecs.
var (
	CU16 Codec = cu16{}
	CU48 Codec = cu48{}
)

type cu16 struct{}

func (cu16) Model() Model                   { return ModelCU16 }
func (cu16) Locks() int                     { return MaxLocks }
func (cu16) MaxBoard() int                  { return MaxBoard }
func (cu16) StatusCmd() byte                { return CmdStatus }
func (cu16) UnlockCmd() byte                { return CmdUnlock }
func (cu16) Tagged() bool                   { return true }
func (cu16) AnswerLen() int                 { return AnswerLen }
func (cu16) EncodeCommand(c Command) []byte { return c.Encode() }
func (cu16) EncodeAnswer(a Answer) []byte   { return a.Encode() }
func (cu16) DecodeCommand(buf []byte) (Command, int, bool, int) {
	return DecodeCommand(buf)
}
func (cu16) DecodeAnswer(buf []byte) (Answer, int, bool, int) { return DecodeAnswer(buf) }

// Answered: a CU16 answer names the awaited frame (its tag); a partial one is not
// taken for an answer (the frame stays pending until a later answer settles it).
func (cu16) Answered(buf []byte, cmd Command, partial bool) bool {
	return !partial && corruptAnswer(buf, cmd)
}

type cu48 struct{}

func (cu48) Model() Model    { return ModelCU48 }
func (cu48) Locks() int      { return MaxLocks48 }
func (cu48) MaxBoard() int   { return MaxBoard48 }
func (cu48) StatusCmd() byte { return Cmd48Status }
func (cu48) UnlockCmd() byte { return Cmd48Unlock }
func (cu48) Tagged() bool    { return false }
func (cu48) AnswerLen() int  { return Answer48Len }

// EncodeCommand returns a CU48 command's six bytes: Lock is the lock number − 1
// (0–47), zero for a status read.
func (cu48) EncodeCommand(c Command) []byte {
	b := []byte{stx, c.Board, c.Lock, c.Cmd, etx, 0}
	b[5] = sum(b[:5])
	return b
}

func (cu48) DecodeCommand(buf []byte) (Command, int, bool, int) {
	return decode(buf, Command48Len, func(f []byte) Command {
		return Command{Board: f[1], Lock: f[2], Cmd: f[3]}
	})
}

// EncodeAnswer returns a CU48 answer's eighteen bytes (Cmd is not sent: byte 3 is
// always Answer48Status).
func (cu48) EncodeAnswer(a Answer) []byte {
	b := make([]byte, Answer48Len)
	b[0], b[1], b[2], b[3] = stx, a.Board, a.Lock, Answer48Status
	for i := range 6 {
		b[4+i] = byte(a.Hooks >> (8 * i))
		b[10+i] = byte(a.Sensors >> (8 * i))
	}
	b[16] = etx
	b[17] = sum(b[:17])
	return b
}

// DecodeAnswer takes only frames whose byte 3 is Answer48Status, as the sources'
// parsers do; other frames of the same shape are skipped like noise.
func (cu48) DecodeAnswer(buf []byte) (Answer, int, bool, int) {
	return decodeIf(buf, Answer48Len, func(f []byte) bool { return f[3] == Answer48Status }, func(f []byte) Answer {
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
		if buf[i] != stx || buf[i+1] != cmd.Board || (i+3 < len(buf) && buf[i+3] != Answer48Status) {
			continue
		}
		if whole := len(buf)-i >= Answer48Len; whole != partial {
			return true
		}
	}
	return false
}
