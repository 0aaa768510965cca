package apiserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSourceAddr: the forwarded client address is believed from trusted proxies only, and
// only the part of X-Forwarded-For the proxies wrote.
func TestSourceAddr(t *testing.T) {
	loopback := trustedProxiesOf("")
	private := trustedProxiesOf("10.0.0.0/8,127.0.0.1")
	tests := []struct {
		name    string
		peer    string
		xff     []string
		realIP  string
		proxies string
		want    string
	}{
		{name: "direct client", peer: "203.0.113.7:5123", want: "203.0.113.7"},
		{name: "a direct client's X-Forwarded-For is ignored", peer: "203.0.113.7:5123", xff: []string{"198.51.100.1"}, want: "203.0.113.7"},
		{name: "a direct client's X-Real-IP is ignored", peer: "203.0.113.7:5123", realIP: "198.51.100.1", want: "203.0.113.7"},
		{name: "behind nginx on loopback", peer: "127.0.0.1:40000", xff: []string{"203.0.113.7"}, want: "203.0.113.7"},
		{name: "a client's own X-Forwarded-For entry is skipped", peer: "127.0.0.1:40000", xff: []string{"1.2.3.4, 203.0.113.7"}, want: "203.0.113.7"},
		{name: "several headers", peer: "127.0.0.1:40000", xff: []string{"1.2.3.4", "203.0.113.7"}, want: "203.0.113.7"},
		{name: "X-Real-IP when nothing is forwarded", peer: "127.0.0.1:40000", realIP: "203.0.113.7", want: "203.0.113.7"},
		{name: "nginx itself", peer: "127.0.0.1:40000", want: "127.0.0.1"},
		{name: "a chain of trusted proxies", peer: "10.1.1.1:80", xff: []string{"203.0.113.7, 10.2.2.2"}, proxies: "private", want: "203.0.113.7"},
		{name: "an unreadable hop", peer: "127.0.0.1:40000", xff: []string{"203.0.113.7, garbage"}, want: "127.0.0.1"},
		{name: "IPv6 client", peer: "[::1]:40000", xff: []string{"2001:db8::7"}, want: "2001:db8::7"},
		{name: "IPv4 in IPv6", peer: "[::ffff:203.0.113.7]:5123", want: "203.0.113.7"},
		{name: "loopback not trusted", peer: "127.0.0.1:40000", xff: []string{"203.0.113.7"}, proxies: "none", want: "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if tt.realIP != "" {
				r.Header.Set("X-Real-IP", tt.realIP)
			}
			proxies := loopback
			switch tt.proxies {
			case "private":
				proxies = private
			case "none":
				proxies = trustedProxiesOf("none")
			}
			assert.Equal(t, tt.want, sourceAddr(r, proxies).String())
		})
	}
	assert.Equal(t, "2001:db8:1:2::/64", addrBucket(parseAddr("2001:db8:1:2:3:4:5:6")), "an IPv6 address counts by its /64")
	assert.Equal(t, "203.0.113.7", addrBucket(parseAddr("203.0.113.7")))
}
