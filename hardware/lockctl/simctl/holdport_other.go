//go:build !unix

package simctl

import (
	"io"
	"net"
)

// holdPort holds nothing where sockets are not Unix ones: the port is free while unreachable.
func holdPort(net.Addr) io.Closer { return nil }
