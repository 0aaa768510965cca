package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultAcquireTimeout is how long a caller waits for a free pool connection before the
// store answers ErrOverloaded, when Options.AcquireTimeout is zero.
const DefaultAcquireTimeout = 2 * time.Second

// acquireLimit bounds the wait for a pool connection without bounding the statement that
// runs on it. pgxpool waits on the caller's context, so without it a burst queues every
// request behind the pool until its own deadline (DESIGN §8: overload is answered, not
// waited out). It is a pgxpool.AcquireTracer because the context its start hook returns is
// the one pgxpool uses for the acquire alone: Query, Exec, Begin and friends keep running
// their statement on the caller's context.
type acquireLimit struct{ wait time.Duration }

// acquireCtxKey finds the acquire context under whatever other tracers wrap around it.
type acquireCtxKey struct{}

// acquireCtx is the caller's context plus the acquire deadline. Its Err tells a deadline of
// its own apart from the caller's, so the wait ending here surfaces as ErrOverloaded from
// every pool call (the pool returns the context's error as it is).
type acquireCtx struct {
	context.Context
	caller context.Context
	wait   time.Duration
	cancel context.CancelFunc
}

func (c *acquireCtx) Err() error {
	err := c.Context.Err()
	if err != nil && c.caller.Err() == nil {
		return &AcquireTimeoutError{Wait: c.wait}
	}
	return err
}

func (c *acquireCtx) Value(key any) any {
	if key == (acquireCtxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func (a acquireLimit) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	actx, cancel := context.WithTimeout(ctx, a.wait)
	return &acquireCtx{Context: actx, caller: ctx, wait: a.wait, cancel: cancel}
}

func (acquireLimit) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	if c, ok := ctx.Value(acquireCtxKey{}).(*acquireCtx); ok {
		c.cancel()
	}
}

// The pool only takes an acquire tracer from the connection's tracer, which must also
// trace queries; this one leaves them alone.
func (acquireLimit) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (acquireLimit) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// AcquireTimeoutError means no pool connection became free within the acquire timeout:
// the pool is saturated, so it is ErrOverloaded (503 + Retry-After), and, like any deadline,
// context.DeadlineExceeded.
type AcquireTimeoutError struct{ Wait time.Duration }

func (e *AcquireTimeoutError) Error() string {
	return fmt.Sprintf("%s: no connection free within %s", ErrOverloaded, e.Wait)
}

// Is makes errors.Is answer true for ErrOverloaded and context.DeadlineExceeded.
func (e *AcquireTimeoutError) Is(target error) bool {
	return target == ErrOverloaded || target == context.DeadlineExceeded
}
