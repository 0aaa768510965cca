package kerong

import "fmt"

// Model is a family of Kerong boards; each speaks its own frames.
type Model string

// Models.
const (
	ModelCU16 Model = "cu16"
	ModelCU48 Model = "cu48"
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

// The start and end bytes of every frame, of either model.
const (
	stx = 0x02
	etx = 0x03
)

// Command is a frame from the gateway to a board.
type Command struct {
	Board byte // 0–15 (CU16), 0–9 (CU48)
	Lock  byte // lock number − 1: 0–15 (CU16), 0–47 (CU48)
	Cmd   byte
}

// Answer is a board's status frame: its answer to a status read or to an unlock.
type Answer struct {
	Board, Lock, Cmd byte
	// Hooks and Sensors hold locks 1–16 (CU16) or 1–48 (CU48) in bits 0–15 or 0–47.
	Hooks, Sensors uint64
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
