package apiserver

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/lockernet/lockernet/internal/config"
)

// The source address of a request, which failed credentials are counted against (DESIGN §8).
// Behind the production proxy every request comes from nginx; the client's address is the one
// nginx forwards (X-Forwarded-For, to which nginx appends the address it saw, or X-Real-IP),
// believed only when the request comes from a trusted proxy (LOCKERNET_TRUSTED_PROXIES,
// loopback by default). Anyone else could write any address into those headers.

type clientAddrKey struct{}

// clientAddrOf returns the request's source address as clientAddress found it.
func clientAddrOf(ctx context.Context) netip.Addr {
	a, _ := ctx.Value(clientAddrKey{}).(netip.Addr)
	return a
}

// clientAddress notes each request's source address in its context.
func (s *Server) clientAddress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := sourceAddr(r, s.trustedProxies)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, a)))
	})
}

// trustedProxiesOf reads the setting; an invalid one (config.Load refuses it) trusts none.
func trustedProxiesOf(setting string) []netip.Prefix {
	p, err := config.ParseTrustedProxies(setting)
	if err != nil {
		return nil
	}
	return p
}

func trusted(a netip.Addr, proxies []netip.Prefix) bool {
	return slices.ContainsFunc(proxies, func(p netip.Prefix) bool { return p.Contains(a) })
}

// sourceAddr is the peer's address, or, when the peer is a trusted proxy, the address the
// proxies forward: the right-most X-Forwarded-For entry that is not itself a trusted proxy
// (entries further left were written by the client and prove nothing), else X-Real-IP.
func sourceAddr(r *http.Request, proxies []netip.Prefix) netip.Addr {
	peer := parseAddr(r.RemoteAddr)
	if !peer.IsValid() || !trusted(peer, proxies) {
		return peer
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a := parseAddr(hops[i])
		if !a.IsValid() {
			return peer // a hop nobody can read: stop at the last one we trust
		}
		if !trusted(a, proxies) {
			return a
		}
		peer = a
	}
	if a := parseAddr(r.Header.Get("X-Real-IP")); a.IsValid() {
		return a
	}
	return peer
}

// parseAddr reads "ip", "ip:port" or "[ipv6]:port"; the zero Addr when it is none of them.
func parseAddr(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// addrBucket names a source address in a rate-limit bucket: an IPv6 address by its /64 (one
// host's usual share), so that a guesser cannot walk its own prefix for fresh allowances.
func addrBucket(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}
