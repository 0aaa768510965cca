package towersim

import (
	"io"
	"log/slog"
	"net/http"
	"time"
)

// Option adjusts a Tower, Relay, ClientCredentials or Simulator.
type Option func(*options)

type options struct {
	now         func() time.Time
	logger      *slog.Logger
	httpClient  *http.Client
	tokenSource TokenSource
}

func buildOptions(opts []Option) options {
	o := options{
		now:        time.Now,
		logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		httpClient: &http.Client{Timeout: 15 * time.Second},
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClock replaces the clock: the tower's clock (token expiry, event times) and the one
// that decides when a cached access token is due for refresh.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithLogger sets the logger (the default discards).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithHTTPClient sets the client used to reach the cloud.
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.httpClient = c }
}

// WithTokenSource replaces the Simulator's default client-credentials token source.
func WithTokenSource(ts TokenSource) Option {
	return func(o *options) { o.tokenSource = ts }
}
