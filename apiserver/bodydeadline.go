package apiserver

import (
	"io"
	"net/http"
	"time"
)

// BodyReadTimeout is how long a client may take to send a request body.
const BodyReadTimeout = 5 * time.Second

// liftBodyDeadline clears the connection's read deadline once the request body has been
// read. It is the innermost middleware, so it wraps the body huma reads. huma gives a body
// BodyReadTimeout by setting that deadline and never clears it: a handler that outlives it
// (Prefer: wait up to 30 s) would have its connection's context canceled when the server's
// background read times out, for that request and for every later one on the keep-alive
// connection.
func liftBodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Without a body too: huma sets the deadline before it reads an empty body, and the
		// server's background read is already waiting on the connection.
		if r.Body != nil {
			rc := http.NewResponseController(w)
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		next.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.lifted {
		b.lifted = true
		b.lift()
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	if !b.lifted {
		b.lifted = true
		b.lift()
	}
	return b.ReadCloser.Close()
}
