package doors

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCount(t *testing.T) {
	t.Parallel()
	base := Actuations{"GW-1": {1: 3, 2: 0, 3: 0}, "GW-2": {1: 0}}
	tests := []struct {
		name  string
		now   Actuations
		opens []Open
		want  Account
	}{
		{"each asked door moved once", Actuations{"GW-1": {1: 4, 2: 1, 3: 0}, "GW-2": {1: 1}},
			[]Open{{"GW-1", 1, true}, {"GW-1", 2, true}, {"GW-2", 1, true}},
			Account{Sent: 3, Actuated: 3}},
		{"a door moved twice for one open", Actuations{"GW-1": {1: 3, 2: 2, 3: 0}, "GW-2": {1: 0}},
			[]Open{{"GW-1", 2, true}},
			Account{Sent: 1, Actuated: 1, Duplicates: 1}},
		{"a door nobody asked for moved", Actuations{"GW-1": {1: 3, 2: 0, 3: 1}, "GW-2": {1: 0}},
			[]Open{{"GW-1", 2, false}},
			Account{Sent: 1, Duplicates: 1}},
		{"the same gateway's locker id on another gateway is another door", Actuations{"GW-1": {1: 3, 2: 0, 3: 0}, "GW-2": {1: 1}},
			[]Open{{"GW-1", 1, false}},
			Account{Sent: 1, Duplicates: 1}},
		{"answered opened, never moved", Actuations{"GW-1": {1: 3, 2: 0, 3: 0}, "GW-2": {1: 0}},
			[]Open{{"GW-1", 2, true}},
			Account{Sent: 1, FalseOpen: 1}},
		{"moved without an opened answer", Actuations{"GW-1": {1: 3, 2: 1, 3: 0}, "GW-2": {1: 0}},
			[]Open{{"GW-1", 2, false}},
			Account{Sent: 1, Actuated: 1, MovedUnconfirmed: 1}},
		{"the baseline's opens are not counted", Actuations{"GW-1": {1: 3, 2: 0, 3: 0}, "GW-2": {1: 0}},
			nil, Account{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, Count(tt.now, base, tt.opens))
		})
	}
}

func TestOpened(t *testing.T) {
	t.Parallel()
	assert.True(t, Opened([]byte(`{"success":true,"lockerId":1001,"doorOpen":true,"message":"opened"}`)))
	assert.False(t, Opened([]byte(`{"success":true,"lockerId":1001,"doorOpen":false}`)))
	assert.False(t, Opened([]byte(`{"error":"GATEWAY_UNRESPONSIVE","message":"the gateway did not answer in time"}`)))
	assert.False(t, Opened(nil))
}
