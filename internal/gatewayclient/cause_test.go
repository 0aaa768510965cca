package gatewayclient

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The causes that reach a caller's error body are fixed phrases: never the Go error, which
// names the gateway's internal address.
func TestFixedCauses(t *testing.T) {
	addr := "10.20.30.40:8101"
	op := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://" + addr + "/lockers/101/open",
			Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 20, 30, 40), Port: 8101},
				Err: os.NewSyscallError("connect", err)}}
	}
	for _, c := range []struct {
		err       error
		delivered bool
		want      string
	}{
		{op(syscall.ECONNREFUSED), false, "the gateway refused the connection"},
		{&url.Error{Op: "Post", URL: "http://gw-1.internal/x", Err: &net.DNSError{Err: "no such host", Name: "gw-1.internal"}}, false, "the gateway's host name did not resolve"},
		{op(syscall.EHOSTUNREACH), false, "the gateway's network is unreachable"},
		{fmt.Errorf("post http://%s: %w", addr, context.DeadlineExceeded), true, "the gateway did not answer in time"},
		{fmt.Errorf("post http://%s: %w", addr, context.DeadlineExceeded), false, "the connection to the gateway timed out"},
		{fmt.Errorf("read http://%s: %w", addr, io.ErrUnexpectedEOF), true, "the gateway closed the connection before it answered"},
		{fmt.Errorf("get http://%s: %w", addr, tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), false, "the TLS handshake with the gateway failed"},
		{fmt.Errorf("something else at %s", addr), false, "the gateway could not be reached"},
		{fmt.Errorf("something else at %s", addr), true, "the gateway's answer could not be read"},
	} {
		got := Cause(c.err, c.delivered)
		assert.Equal(t, c.want, got, "%v", c.err)
		assert.NotContains(t, got, "10.20.30.40")
		assert.False(t, strings.Contains(got, "internal"), got)
	}
}
