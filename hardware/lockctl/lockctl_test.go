package lockctl_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/lockernet/lockernet/hardware/lockctl"
)

func TestRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"communication error", fmt.Errorf("open channel 1: %w", lockctl.ErrUnreachable), true},
		{"hardware fault", fmt.Errorf("open channel 1: %w", lockctl.ErrHardwareFault), false},
		{"both: the fault wins", errors.Join(lockctl.ErrUnreachable, lockctl.ErrHardwareFault), false},
		{"timeout is the caller's call", context.DeadlineExceeded, false},
		{"queued past the deadline, nothing sent", fmt.Errorf("open channel 1: %w: %w", lockctl.ErrUnreachable, context.DeadlineExceeded), true},
		{"sent, outcome unknown", fmt.Errorf("open channel 1: %w", lockctl.ErrOutcomeUnknown), false},
		{"unknown wins over unreachable", errors.Join(lockctl.ErrUnreachable, lockctl.ErrOutcomeUnknown), false},
		{"unknown channel", lockctl.ErrUnknownChannel, false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, lockctl.Retryable(tc.err))
		})
	}
}
