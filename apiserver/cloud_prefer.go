package apiserver

import (
	"strconv"
	"strings"
	"time"

	"github.com/lockernet/lockernet/internal/gatewayreq"
)

// Prefer (RFC 7240) on the gateway cloud API (DESIGN §6.2): how long a request waits for its
// gateway before answering 202, and what Preference-Applied says.

// preferences is what the Prefer header asks for, after clamping.
type preferences struct {
	wait    time.Duration
	applied []string
}

// parsePrefer reads RFC 7240 preferences: wait=N (integer seconds, clamped to [0, max]) and
// respond-async (202 at once, unless a wait is given too). Unknown or malformed preferences
// are ignored.
func parsePrefer(values []string, def, maxWait time.Duration) preferences {
	p := preferences{wait: def}
	async, waitSet := false, false
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			token, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			name, val, hasVal := strings.Cut(strings.TrimSpace(token), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "respond-async":
				async = true
			case "wait":
				n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(val), `"`), 10, 64)
				if !hasVal || err != nil || waitSet {
					continue
				}
				waitSet = true
				switch {
				case n <= 0:
					p.wait = 0
				case n >= int64(maxWait/time.Second):
					p.wait = maxWait
				default:
					p.wait = time.Duration(n) * time.Second
				}
			}
		}
	}
	// With both, wait bounds how long to work before answering asynchronously (RFC 7240 §4.3).
	if async {
		p.applied = append(p.applied, "respond-async")
		if !waitSet {
			p.wait = 0
		}
	}
	if waitSet {
		p.applied = append(p.applied, "wait="+strconv.FormatInt(int64(p.wait/time.Second), 10))
	}
	return p
}

// syncApplied is what Preference-Applied says of an answer given synchronously, within the
// wait: respond-async was not applied to it (RFC 7240 §4.3), the wait was.
func syncApplied(applied []string) []string {
	out := make([]string, 0, len(applied))
	for _, a := range applied {
		if a != "respond-async" {
			out = append(out, a)
		}
	}
	return out
}

func (c *cloud) defaultWait(class string) time.Duration {
	switch class {
	case gatewayreq.ClassHardware:
		return c.settings.HardwareWait
	case gatewayreq.ClassWrite:
		return c.settings.WriteWait
	}
	return c.settings.ReadWait
}
