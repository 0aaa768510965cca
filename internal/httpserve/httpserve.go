// Package httpserve runs an http.Server on a listener until its context is done and then
// drains it, the same way in every process.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Listen takes addr, naming the setting in the error so a busy port is clear at once.
func Listen(addr, setting string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", addr, setting, err)
	}
	return ln, nil
}

// WriteTimeout bounds a whole exchange after its headers were read: longer than the longest
// wait a request may ask for (Prefer: wait is clamped to 30 s, an access-code open waits 15 s)
// plus the time to read its body and write the answer, so long-polls work and a client that
// stops reading cannot hold a connection for ever.
const WriteTimeout = 90 * time.Second

// Serve serves h on ln until ctx is done, then lets in-flight requests finish for up to
// drain before closing the remaining connections.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, drain time.Duration) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, WriteTimeout: WriteTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("shut down http: %w", err)
		}
	}
	return nil
}
