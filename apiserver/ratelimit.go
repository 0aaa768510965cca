package apiserver

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/store"
)

// RateLimits are the default requests per minute of DESIGN §8 (per-caller overrides live in
// the database). Zero values take the defaults.
type RateLimits struct {
	Tower  int // tower API and mobile SDK API together, per service-provider client (600)
	AppKey int // app engine API, per key (300)
	Token  int // token endpoint, per client id (60)
	// TrustedProxies is LOCKERNET_TRUSTED_PROXIES: the proxies whose forwarded client address
	// wrong credentials are counted against ("": loopback only).
	TrustedProxies string
}

func (r RateLimits) withDefaults() RateLimits {
	if r.Tower <= 0 {
		r.Tower = 600
	}
	if r.AppKey <= 0 {
		r.AppKey = 300
	}
	if r.Token <= 0 {
		r.Token = 60
	}
	return r
}

// RateLimitsFromConfig reads LOCKERNET_TOWER_RATE_LIMIT, LOCKERNET_APP_RATE_LIMIT,
// LOCKERNET_TOKEN_RATE_LIMIT and LOCKERNET_TRUSTED_PROXIES.
func RateLimitsFromConfig(cfg config.Config) RateLimits {
	return RateLimits{Tower: cfg.TowerRateLimit, AppKey: cfg.AppRateLimit, Token: cfg.TokenRateLimit,
		TrustedProxies: cfg.TrustedProxies}
}

// newRateLimitedCounter registers the count of the requests each surface refused for their
// rate limit.
func newRateLimitedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockernet_rate_limited_total",
		Help: "Requests refused with 429 because their caller exceeded its rate limit, by surface (tower, appkey, token), " +
			"or because their source address is in its back-off after wrong credentials (token_failures, appkey_failures, gateway_key_failures).",
	}, []string{"surface"})
	reg.MustRegister(c)
	return c
}

// countRequest counts the request against the caller's limit and sets the X-RateLimit-*
// headers. When it is refused, it returns the Retry-After seconds (> 0). An error counting
// (Postgres away) lets the request through: the limit protects the service, it must not take
// it down with it.
func (s *Server) countRequest(ctx context.Context, setHeader func(name, value string), kind store.RateKind, id string, limit int) int {
	st, err := s.deps.Store.CountRequest(ctx, kind, id, limit)
	if err != nil {
		s.logger.WarnContext(ctx, "count request for its rate limit", "kind", kind, "err", err)
		return 0
	}
	return s.rateHeaders(setHeader, kind, st)
}

// rateHeaders sets the X-RateLimit-* headers of a counted request and, when it was refused,
// Retry-After, whose seconds (> 0) it returns.
func (s *Server) rateHeaders(setHeader func(name, value string), kind store.RateKind, st store.RateState) int {
	setHeader("X-RateLimit-Limit", strconv.Itoa(st.Limit))
	setHeader("X-RateLimit-Remaining", strconv.Itoa(st.Remaining()))
	setHeader("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(st.ResetAt()), 10))
	if st.Allowed {
		return 0
	}
	s.rateLimited.WithLabelValues(string(kind)).Inc()
	wait := int((st.RetryAfter() + time.Second - 1) / time.Second)
	wait = max(wait, 1)
	setHeader("Retry-After", strconv.Itoa(wait))
	return wait
}

// rateLimited is the refusal of a request past its caller's rate limit (tower API, mobile
// SDK API, app engine API), to wait seconds.
func rateLimited(wait int) error {
	return &attemptsLimitedError{msg: "rate limit exceeded: try again in " + strconv.Itoa(wait) + " s", retryAfter: wait}
}
