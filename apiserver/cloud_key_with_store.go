package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/lockernet/lockernet/internal/store"
)

// A proxied operation checks and counts its key in the round trip that stores its request
// (store.AuthorizeAndCreateGatewayRequest): one round trip and one commit instead of two
// round trips, on the path every proxied call waits on. The edge (authenticateKey) still
// refuses a missing, malformed or doubly presented key at once; a key of the right shape
// is settled by the handler. Whatever is written before that (huma's own refusals of the
// input, a 503 before anything is stored) is held back until the key is settled, and the
// edge settles it then with the key's own statement: a request with a bad key, or over its
// limit, is refused as such whatever else is wrong with it, exactly as when the edge
// checks the key first.

// metaKeyWithStore marks an operation whose key is checked in the round trip that stores
// its gateway request.
const metaKeyWithStore = "lockernet.keyCheckedWithStore"

func checksKeyWithStore(op *huma.Operation) bool {
	v, _ := op.Metadata[metaKeyWithStore].(bool)
	return v
}

type pendingKeyCtx struct{}

// pendingKey is a presented key not checked yet, and what was written meanwhile.
type pendingKey struct {
	hash    []byte
	under   huma.Context // writes go straight here once the key is settled
	settled bool
	status  int
	headers []heldHeader
	body    bytes.Buffer
}

type heldHeader struct {
	name, value string
	add         bool
}

// pendingKeyOf returns the request's unchecked key; nil when the edge checked it.
func pendingKeyOf(ctx context.Context) *pendingKey {
	p, _ := ctx.Value(pendingKeyCtx{}).(*pendingKey)
	return p
}

// heldContext is the huma context of an operation while its key is unsettled.
type heldContext struct {
	humaContext
	p *pendingKey
}

// humaContext names huma.Context as an embedded field that does not hide its Context method.
type humaContext = huma.Context

func (c heldContext) SetStatus(code int) {
	if c.p.settled {
		c.humaContext.SetStatus(code)
		return
	}
	c.p.status = code
}

func (c heldContext) Status() int {
	if c.p.settled {
		return c.humaContext.Status()
	}
	return c.p.status
}

func (c heldContext) SetHeader(name, value string) {
	if c.p.settled {
		c.humaContext.SetHeader(name, value)
		return
	}
	c.p.headers = append(c.p.headers, heldHeader{name: name, value: value})
}

func (c heldContext) AppendHeader(name, value string) {
	if c.p.settled {
		c.humaContext.AppendHeader(name, value)
		return
	}
	c.p.headers = append(c.p.headers, heldHeader{name: name, value: value, add: true})
}

func (c heldContext) BodyWriter() io.Writer {
	if c.p.settled {
		return c.humaContext.BodyWriter()
	}
	return &c.p.body
}

// withKeyPending runs an operation whose handler checks the key (hash of the presented
// one) with its store round trip, and settles the key afterwards if the handler did not.
func (s *Server) withKeyPending(ctx huma.Context, hash []byte, next func(huma.Context)) {
	p := &pendingKey{hash: hash, under: ctx}
	next(huma.WithValue(heldContext{humaContext: ctx, p: p}, pendingKeyCtx{}, p))
	if p.settled {
		return
	}
	began := time.Now()
	auth, err := s.deps.Store.AuthorizeGatewayKey(ctx.Context(), hash, s.cloud.settings.RateLimit)
	markTiming(ctx.Context(), "auth", began)
	if verdict := s.settleKey(ctx.Context(), p, auth, err); verdict != nil {
		s.writeCloudFailure(ctx, "authenticate", verdict)
		return
	}
	for _, h := range p.headers {
		if h.add {
			ctx.AppendHeader(h.name, h.value)
		} else {
			ctx.SetHeader(h.name, h.value)
		}
	}
	if p.status != 0 {
		ctx.SetStatus(p.status)
	}
	if p.body.Len() > 0 {
		_, _ = ctx.BodyWriter().Write(p.body.Bytes())
	}
}

// settleKey records the check of a pending key (AuthorizeGatewayKey's results): from now on
// writes go through; a valid key's rate-limit headers are set. The verdict is nil for a key
// within its limit, else the error to answer.
func (s *Server) settleKey(ctx context.Context, p *pendingKey, auth store.KeyAuthorization, err error) error {
	p.settled = true
	verdict := s.keyVerdict(ctx, auth, err)
	if err == nil {
		setRateLimitHeaders(p.under, auth)
	}
	return verdict
}

// keyVerdict is what a key's check (AuthorizeGatewayKey's results) means for the request:
// nil to go on, or the error to answer. A key that is not valid counts against the request's
// source address (credential_failures.go).
func (s *Server) keyVerdict(ctx context.Context, auth store.KeyAuthorization, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s.gatewayKeyFailure(ctx)
	case errors.Is(err, context.Canceled):
		return err
	case err != nil:
		return fmt.Errorf("%w: %w", errAuthUnavailable, err)
	case !auth.Allowed:
		s.cloud.rateLimited.Inc()
		wait := int64((auth.RetryAfter() + time.Second - 1) / time.Second)
		return &rateLimitedError{limit: auth.Limit, retryAfterSeconds: max(wait, 1)}
	}
	return nil
}

func setRateLimitHeaders(ctx huma.Context, auth store.KeyAuthorization) {
	ctx.SetHeader("X-RateLimit-Limit", strconv.Itoa(auth.Limit))
	ctx.SetHeader("X-RateLimit-Remaining", strconv.Itoa(auth.Remaining()))
	ctx.SetHeader("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(auth.ResetAt()), 10))
}

// submitWithKey stores a proxied call's request for the organization of the pending key
// p (every proxied operation has one: registerProxy marks them), checking and counting the
// key in the same round trip, and settles p. refused is the key's verdict when it is not
// valid or over its limit (nothing was stored); err is the store's: ErrNotFound for a
// location without an enabled gateway of the key's organization, ErrIdempotencyKeyReused.
func (s *Server) submitWithKey(ctx context.Context, p *pendingKey, r store.NewGatewayRequest,
	idem *store.IdempotencyClaim) (row store.GatewayRequest, gw store.Gateway, created bool, refused, err error) {
	k, row, gw, created, err := s.deps.Store.AuthorizeAndCreateGatewayRequest(ctx, p.hash, s.cloud.settings.RateLimit, r, idem)
	keyErr := err
	if k.KeyID != uuid.Nil {
		keyErr = nil // the key was checked; err, if any, is the store's
	}
	if refused = s.settleKey(ctx, p, k, keyErr); refused != nil {
		return store.GatewayRequest{}, store.Gateway{}, false, refused, nil
	}
	return row, gw, created, nil, err
}
