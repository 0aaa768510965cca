package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Five failed logins from one address within a minute make it wait; another address is not
// held back; the wait ends as the oldest failure leaves the window.
func TestLoginThrottle(t *testing.T) {
	l := newLoginThrottle()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for i := range loginFailures {
		require.Zero(t, l.wait("10.0.0.9", now), "attempt %d", i+1)
		l.failed("10.0.0.9", now.Add(time.Duration(i)*time.Second))
	}
	assert.Equal(t, loginWindow-4*time.Second, l.wait("10.0.0.9", now.Add(4*time.Second)))
	assert.Zero(t, l.wait("10.0.0.10", now), "another address")
	assert.Zero(t, l.wait("10.0.0.9", now.Add(loginWindow)), "the oldest failure left the window")
	assert.Equal(t, "10.0.0.9", clientHost("10.0.0.9:51234"))
}

// Security entries (failed logins) are pruned among themselves: a flood of them never
// pushes the operational entries out of the event log.
func TestSecurityEntriesDoNotEvictOperationalOnes(t *testing.T) {
	keepLogEntries, keepSecurityEntries = 50, 20
	t.Cleanup(func() { keepLogEntries, keepSecurityEntries = 10000, 1000 })
	ctx := context.Background()
	st, err := openStore(ctx, filepath.Join(t.TempDir(), "gw.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.close() })
	for i := range 30 {
		require.NoError(t, st.appendLog(ctx, logEntry{Timestamp: time.Now(), Level: "info", Message: fmt.Sprintf("door opened %d", i)}))
	}
	for range 1000 {
		require.NoError(t, st.appendLog(ctx, logEntry{Timestamp: time.Now(), Level: "warn", Message: "admin login failed",
			Fields: map[string]any{"category": CategorySecurity}}))
	}
	entries, _, err := st.logs(ctx, 5000)
	require.NoError(t, err)
	ops, sec := 0, 0
	for _, e := range entries {
		if e.Message == "admin login failed" {
			sec++
		} else {
			ops++
		}
	}
	assert.Equal(t, 30, ops, "every operational entry kept")
	assert.LessOrEqual(t, sec, 20+100, "security entries pruned to their own cap (pruning runs every 100 entries)")
}
