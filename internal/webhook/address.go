package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Resolver finds a host's addresses (net.DefaultResolver in production).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy is where deliveries may go. In production (Strict) only https URLs whose every
// address is public; elsewhere (sandbox, development) http and loopback too, so a receiver
// can run on the same machine.
type Policy struct {
	Strict   bool
	Resolver Resolver
}

// ErrURL is the reason a URL is refused (the message says which rule).
var ErrURL = errors.New("webhook url refused")

// CheckURL decides whether raw may be an endpoint's URL: absolute http(s), no user info, at
// most 2,048 bytes, and under a strict policy https with every resolved address public.
func (p Policy) CheckURL(ctx context.Context, raw string) error {
	if len(raw) > 2048 {
		return fmt.Errorf("%w: longer than 2048 bytes", ErrURL)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%w: not an absolute URL", ErrURL)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("%w: the scheme must be https", ErrURL)
	}
	if u.User != nil {
		return fmt.Errorf("%w: user info is not allowed", ErrURL)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%w: a fragment is not allowed", ErrURL)
	}
	if !p.Strict {
		return nil
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%w: the scheme must be https", ErrURL)
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		return checkAddr(a)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := p.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%w: %s does not resolve", ErrURL, host)
	}
	for _, a := range addrs {
		if err := checkAddr(a); err != nil {
			return err
		}
	}
	return nil
}

func (p Policy) resolver() Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}

// checkAddr refuses the addresses a production delivery must never reach.
func checkAddr(a netip.Addr) error {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return fmt.Errorf("%w: %s is a loopback address", ErrURL, a)
	case a.IsPrivate(), cgnat.Contains(a):
		return fmt.Errorf("%w: %s is a private address", ErrURL, a)
	case a.IsMulticast():
		return fmt.Errorf("%w: %s is a multicast address", ErrURL, a)
	case a.IsLinkLocalUnicast():
		return fmt.Errorf("%w: %s is a link-local address", ErrURL, a)
	case a.IsUnspecified():
		return fmt.Errorf("%w: %s is the unspecified address", ErrURL, a)
	case !a.IsGlobalUnicast():
		return fmt.Errorf("%w: %s is not a public address", ErrURL, a)
	}
	return nil
}

// cgnat is the shared address space of carrier-grade NAT (RFC 6598), private in practice.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Client returns the HTTP client of deliveries: timeout for the whole exchange, no
// redirects followed (a 3xx is the answer), and under a strict policy a dialer that checks
// the address it actually connects to, so a name that resolved to a public address when the
// endpoint was saved cannot be pointed at a private one later (DNS rebinding).
func (p Policy) Client(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	if p.Strict {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: dialled %q", ErrURL, address)
			}
			return checkAddr(ap.Addr())
		}
	}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
