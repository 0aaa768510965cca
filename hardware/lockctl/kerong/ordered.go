package kerong

import (
	"context"
	"errors"
	"fmt"
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
	cmd := Command{Board: board, Cmd: b.codec.StatusCmd()}
	if b.codec.Tagged() {
		return b.exchange(ctx, cmd, timeout)
	}
	return b.exchangeOrdered(ctx, cmd, timeout, after)
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

// exchangeOrdered is exchange on a bus without tags (the bus is held).
func (b *bus) exchangeOrdered(ctx context.Context, cmd Command, timeout time.Duration, after bool) (a Answer, sent bool, err error) {
	c, err := b.connect(ctx)
	if err != nil {
		return Answer{}, false, err
	}
	for drained := false; !drained; {
		select {
		case p := <-c.in:
			c.buf = append(c.buf, p...)
		default:
			drained = true
		}
	}
	// What arrived before the command answers earlier frames; a frame cut short
	// here leaves its frame owed.
	waiting, got := b.takeOrdered(c.buf, cmd.Board)
	c.buf = c.buf[:0]
	if after && got {
		return waiting, false, nil
	}
	now := time.Now()
	st := b.board(cmd.Board)
	if len(st.pending) > 0 && now.Sub(st.lastWrite) >= b.lateAnswer {
		st.pending = nil // whatever it still owed is lost
	}
	if len(st.pending) > 0 && !after {
		return Answer{}, false, errOwes
	}
	if err := ctx.Err(); err != nil {
		return Answer{}, false, err
	}
	st.pending = append(st.pending, pendingFrame{cmd: cmd})
	st.inStep = false
	st.lastWrite = now
	if _, err := c.rwc.Write(b.codec.EncodeCommand(cmd)); err != nil {
		b.drop()
		return Answer{}, true, fmt.Errorf("write to %s: %w: %w", b.key, errLinkDown, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		for {
			a, used, ok, skip := b.codec.DecodeAnswer(c.buf)
			if !ok {
				if b.codec.Answered(c.buf, cmd, false) {
					// A damaged frame of the board: it answered its oldest frame.
					c.buf = c.buf[:0]
					if b.popOldest(cmd.Board) {
						return Answer{}, true, errCorruptAnswer
					}
					continue
				}
				c.buf = c.buf[skip:]
				break
			}
			c.buf = c.buf[used:]
			if a.Board != cmd.Board {
				b.popOldest(a.Board)
				continue
			}
			if b.popOldest(cmd.Board) || after {
				return a, true, nil
			}
		}
		select {
		case p := <-c.in:
			c.buf = append(c.buf, p...)
		case <-c.dead:
			b.drop()
			return Answer{}, true, fmt.Errorf("read from %s: %w: %w", b.key, errLinkDown, c.err)
		case <-t.C:
			partial := len(c.buf) > 0
			if b.codec.Answered(c.buf, cmd, true) {
				// The first bytes of a frame of the board and nothing after them: it
				// answered, and the rest was lost.
				b.popOldest(cmd.Board)
			}
			c.buf = c.buf[:0]
			if partial {
				return Answer{}, true, errPartialAnswer
			}
			return Answer{}, true, errNoAnswer
		case <-ctx.Done():
			return Answer{}, true, ctx.Err()
		}
	}
}
