package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockernet/lockernet/internal/lockerrules"
)

// The rule "a lapsed hold counts as available" has its owner in lockerrules (Lapsing); SQL
// keeps a copy in the locker_status() function every read uses (migration 00001), and the
// two must agree for every status: a status whose hold lapsed reads available exactly when
// lockerrules says it lapses, and no status reads otherwise while its hold runs.
func TestLockerStatusSQLAgreesWithTheLapseRule(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	for _, s := range lockerrules.Statuses {
		var lapsed, running int16
		require.NoError(t, st.Pool().QueryRow(ctx,
			`SELECT locker_status($1::smallint, now() - interval '1 second'), locker_status($1::smallint, now() + interval '1 hour')`,
			int16(s)).Scan(&lapsed, &running))
		want := s
		if slices.Contains(lockerrules.Lapsing(), s) {
			want = lockerrules.Available
		}
		assert.EqualValues(t, want, lapsed, "status %d with its hold passed", s)
		assert.EqualValues(t, s, running, "status %d with its hold running", s)
	}
}
