package apiserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/lockernet/lockernet/internal/gatewayreq"
)

func TestParsePrefer(t *testing.T) {
	t.Parallel()
	const def, maxWait = 15 * time.Second, 30 * time.Second
	cases := []struct {
		name    string
		headers []string
		wait    time.Duration
		applied []string
	}{
		{"none", nil, def, nil},
		{"wait", []string{"wait=10"}, 10 * time.Second, []string{"wait=10"}},
		{"wait zero", []string{"wait=0"}, 0, []string{"wait=0"}},
		{"clamped to 30", []string{"wait=31"}, maxWait, []string{"wait=30"}},
		{"huge", []string{"wait=99999999999999999"}, maxWait, []string{"wait=30"}},
		{"negative is zero", []string{"wait=-5"}, 0, []string{"wait=0"}},
		{"respond-async", []string{"respond-async"}, 0, []string{"respond-async"}},
		{"async with a wait waits first", []string{"respond-async, wait=20"}, 20 * time.Second, []string{"respond-async", "wait=20"}},
		{"two headers", []string{"handling=lenient", "wait=7"}, 7 * time.Second, []string{"wait=7"}},
		{"first wait counts", []string{"wait=3", "wait=9"}, 3 * time.Second, []string{"wait=3"}},
		{"case and spaces", []string{" Wait = 4 ; x=y"}, 4 * time.Second, []string{"wait=4"}},
		{"quoted", []string{`wait="6"`}, 6 * time.Second, []string{"wait=6"}},
		{"malformed ignored", []string{"wait=soon", "wait"}, def, nil},
		{"unknown ignored", []string{"return=minimal"}, def, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := parsePrefer(tc.headers, def, maxWait)
			assert.Equal(t, tc.wait, p.wait)
			assert.Equal(t, tc.applied, p.applied)
		})
	}
}

func TestDefaultWaitsByClass(t *testing.T) {
	t.Parallel()
	c := &cloud{settings: CloudSettings{}.withDefaults("q")}
	assert.Equal(t, 5*time.Second, c.defaultWait(gatewayreq.ClassRead))
	assert.Equal(t, 10*time.Second, c.defaultWait(gatewayreq.ClassWrite))
	assert.Equal(t, 15*time.Second, c.defaultWait(gatewayreq.ClassHardware))
	assert.Equal(t, 30*time.Second, c.settings.MaxWait)
	assert.Equal(t, 120, c.settings.RateLimit)
	assert.Equal(t, 30*24*time.Hour, c.settings.IdempotencyTTL)
	assert.Equal(t, 65*time.Second, c.settings.Policy.HardwareTimeout)
	assert.Equal(t, 10*time.Second, c.settings.Policy.CallTimeout)
	assert.Equal(t, 3, c.settings.Policy.DispatchAttempts)
}
