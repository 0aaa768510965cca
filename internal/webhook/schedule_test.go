package webhook_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/webhook"
)

// The default schedule is one LOCKERNET_WEBHOOK_RETRY_SCHEDULE itself would accept, so an
// operator who writes it out gets what the default gives.
func TestDefaultRetryScheduleIsAValidSetting(t *testing.T) {
	t.Parallel()
	def := webhook.DefaultRetrySchedule()
	raw := make([]string, len(def))
	for i, d := range def {
		raw[i] = d.String()
	}
	parsed, err := config.ParseSchedule(strings.Join(raw, ","))
	require.NoError(t, err)
	assert.Equal(t, def, parsed)
}
