package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// DefaultTrustedProxies are the addresses whose X-Forwarded-For / X-Real-IP the apiserver
// believes when LOCKERNET_TRUSTED_PROXIES is not set: loopback only (nginx on the same host,
// as in the cluster shape of make run).
const DefaultTrustedProxies = "127.0.0.0/8,::1/128"

// ParseTrustedProxies reads LOCKERNET_TRUSTED_PROXIES: comma-separated addresses or CIDR
// prefixes of the reverse proxies in front of the apiservers. A request from one of them is
// taken to come from the client address it forwards; from anyone else, from its peer.
// "none" trusts no proxy.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = DefaultTrustedProxies
	}
	if s == "none" {
		return nil, nil
	}
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("parse LOCKERNET_TRUSTED_PROXIES: %q is not an address or a CIDR prefix", part)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// loadProxies reads and checks LOCKERNET_TRUSTED_PROXIES.
func (c *Config) loadProxies() error {
	c.TrustedProxies = env("LOCKERNET_TRUSTED_PROXIES", DefaultTrustedProxies)
	_, err := ParseTrustedProxies(c.TrustedProxies)
	return err
}
