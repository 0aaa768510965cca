package kerong

import (
	"context"
	"errors"
	"time"
)

// Ordered matching, for boards whose status read carries no tag (CU48).
//
// A board handles its frames in the order it gets them and answers each at most
// once, so its answers, in the order they come, belong to its frames in the order
// they were written: each answer is taken as the answer of the board's oldest
// pending frame. A frame's own answer is known only when no frame written to the
// board before it is still owed, so a frame is written only to a board that owes
// nothing; its next answer is then that frame's, and the board is in step again.
//
// A board that owes answers (one was lost, or is late) gets nothing until they come
// or until it has been sent nothing for lateAnswer: the driver takes it that a board
// answers a frame within that time of its being written, or never. Its reads fail
// with nothing sent (errOwes), and so do its opens. One exception: the read-back of
// an unlock whose answer was lost (after). The unlock was written to a board in step,
// so every answer of that board that comes after it was sent after the board handled
// the unlock, whichever frame it answers: the read-back takes the first one (one
// already waiting included) as the door's state after the unlock.

// errOwes: the board owes answers to earlier frames, and its next answer could be theirs.
var errOwes = errors.New("the board owes answers to earlier frames and its answers carry no tag: " +
	"nothing is sent to it until they come or it has been left alone for the late-answer time")

// read sends a status read; after asks for the state after an unlock whose answer
// was lost (see above; a tagged codec's reads always give that).
func (b *bus) read(ctx context.Context, board byte, timeout time.Duration, after bool) (Answer, bool, error) {
	return b.exchange(ctx, Command{Board: board, Cmd: b.codec.StatusCmd()}, timeout, after)
}

// popOldest takes an answer of board as the answer of its oldest pending frame. It
// reports whether that was the last frame the board owed (it is in step again).
func (b *bus) popOldest(board byte) bool {
	st, ok := b.boards[board]
	if !ok || len(st.pending) == 0 {
		return false // nothing owed: a stray frame
	}
	st.pending = st.pending[1:]
	if len(st.pending) == 0 {
		st.inStep = true
		return true
	}
	return false
}

// takeOrdered takes the whole answers in buf as answers to the oldest pending frames
// of their boards, and returns the last one of board, if any.
func (b *bus) takeOrdered(buf []byte, board byte) (last Answer, got bool) {
	for {
		a, used, ok, _ := b.codec.DecodeAnswer(buf)
		if !ok {
			return last, got
		}
		b.popOldest(a.Board)
		if a.Board == board {
			last, got = a, true
		}
		buf = buf[used:]
	}
}

// ordered matches by order (the bus's matcher when the codec has no tags).
type ordered struct {
	b     *bus
	after bool
}

func (m ordered) before(buf []byte, cmd Command, now time.Time) (Answer, bool, error) {
	// What arrived before the command answers earlier frames; a frame cut short
	// here leaves its frame owed.
	waiting, got := m.b.takeOrdered(buf, cmd.Board)
	if m.after && got {
		return waiting, true, nil
	}
	st := m.b.board(cmd.Board)
	if len(st.pending) > 0 && now.Sub(st.lastWrite) >= m.b.lateAnswer {
		st.pending = nil // whatever it still owed is lost
	}
	if len(st.pending) > 0 && !m.after {
		return Answer{}, false, errOwes
	}
	return Answer{}, false, nil
}

func (m ordered) register(cmd *Command, now time.Time) {
	st := m.b.board(cmd.Board)
	st.pending = append(st.pending, pendingFrame{cmd: *cmd})
	st.inStep = false
	st.lastWrite = now
}

func (m ordered) take(a Answer, cmd Command) bool {
	if a.Board != cmd.Board {
		m.b.popOldest(a.Board)
		return false
	}
	return m.b.popOldest(cmd.Board) || m.after
}

// damaged: a damaged frame of the board answered its oldest frame.
func (m ordered) damaged(cmd Command) bool { return m.b.popOldest(cmd.Board) }

func (m ordered) timedOut(buf []byte, cmd Command) {
	if m.b.codec.Answered(buf, cmd, true) {
		// The first bytes of a frame of the board and nothing after them: it
		// answered, and the rest was lost.
		m.b.popOldest(cmd.Board)
	}
}
