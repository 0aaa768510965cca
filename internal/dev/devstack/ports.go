package devstack

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
)

// FreeAddrPairs returns n free 127.0.0.1 addresses whose port + 100 (an instance's admin
// listener in the cluster shape) is free too, for a cluster shape of a test or a drill.
// They are below the kernel's ephemeral range (32768 and up) and the Temporal block
// (FreeTemporalPorts, 28000 and up): a port the kernel hands out for ":0" or for an
// outgoing connection of a process running alongside may be taken again between this
// check and the cluster's own bind (seen: a gateway's "address already in use").
func FreeAddrPairs(n int) ([]string, error) {
	var out []string
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for tries := 0; len(out) < n; tries++ {
		if tries >= 1000 {
			return nil, errors.New("no free ports below 28000 with a free port + 100")
		}
		p := 20000 + rand.IntN(28000-100-20000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		admin, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+100))
		if err != nil {
			ln.Close()
			continue
		}
		held = append(held, ln, admin)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// FreeTemporalPorts finds a frontend port P with P..P+10 free (the Temporal server's ports,
// newTemporalPorts), at most maxTemporalPort and away from the kernel's ephemeral range.
func FreeTemporalPorts() (int, error) {
	for range 50 {
		p := 28000 + rand.IntN(maxTemporalPort-10-28000)
		ok := true
		for _, q := range newTemporalPorts(p).all() {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p, nil
		}
	}
	return 0, errors.New("no free block of ports for the Temporal server")
}
