//go:build unix

package simctl

import (
	"io"
	"net"
	"syscall"
)

// holdPort binds a TCP socket to addr without listening on it: a connection to addr is
// refused (the kernel answers a reset), as with nothing bound, yet the port stays taken, so
// no other listener asking for a free port gets it while the simulated gateway is
// unreachable. The socket does not set SO_REUSEADDR, so even a listener that does cannot bind
// the port beside it. Nil when the port cannot be held (the fault still works, unguarded).
func holdPort(addr net.Addr) io.Closer {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	var sa syscall.Sockaddr
	family := syscall.AF_INET6
	if ip4 := ta.IP.To4(); ip4 != nil {
		family = syscall.AF_INET
		a := &syscall.SockaddrInet4{Port: ta.Port}
		copy(a.Addr[:], ip4)
		sa = a
	} else {
		a := &syscall.SockaddrInet6{Port: ta.Port}
		copy(a.Addr[:], ta.IP.To16())
		sa = a
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil
	}
	syscall.CloseOnExec(fd)
	if err := syscall.Bind(fd, sa); err != nil {
		_ = syscall.Close(fd)
		return nil
	}
	return heldPort(fd)
}

type heldPort int

func (h heldPort) Close() error { return syscall.Close(int(h)) }
