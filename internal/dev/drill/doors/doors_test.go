package doors

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestDisagreement(t *testing.T) {
	t.Parallel()
	unknown := `{"error":"GATEWAY_UNRESPONSIVE","details":{"outcome":"unknown","attempts":1}}`
	tests := []struct {
		name   string
		state  string
		status int
		body   string
		moved  int
		want   string
	}{
		{"completed, moved once", "completed", 200, `{"success":true,"doorOpen":true}`, 1, ""},
		{"completed, never moved", "completed", 200, `{"success":true,"doorOpen":true}`, 0, "completed, but the door did not move"},
		{"completed, moved twice", "completed", 200, `{"success":true,"doorOpen":true}`, 2, "completed, but the door moved 2 times"},
		{"completed with a 5xx", "completed", 504, unknown, 1, "completed answered HTTP 504"},
		{"rejected, not moved", "rejected", 502, `{"error":"GATEWAY_REJECTED","details":{"gatewayStatus":500}}`, 0, ""},
		{"rejected, moved", "rejected", 502, `{"error":"GATEWAY_REJECTED"}`, 1, "rejected, but the door moved once"},
		{"rejected saying the outcome is unknown", "rejected", 502, `{"error":"GATEWAY_REJECTED","details":{"outcome":"unknown"}}`, 0,
			"rejected with details.outcome unknown"},
		{"dispatch_failed, not moved", "dispatch_failed", 503, `{"error":"DISPATCH_FAILED"}`, 0, ""},
		{"dispatch_failed, moved", "dispatch_failed", 503, `{"error":"DISPATCH_FAILED"}`, 1, "dispatch_failed, but the door moved once"},
		{"unresponsive, unknown, moved once", "gateway_unresponsive", 504, unknown, 1, ""},
		{"unresponsive, unknown, not moved", "gateway_unresponsive", 504, unknown, 0, ""},
		{"unresponsive, unknown, moved twice", "gateway_unresponsive", 504, unknown, 2, "gateway_unresponsive, but the door moved 2 times"},
		{"unresponsive without the unknown outcome", "gateway_unresponsive", 504, `{"error":"GATEWAY_UNRESPONSIVE","details":{}}`, 0,
			"gateway_unresponsive without details.outcome unknown"},
		{"a state's status is not its own", "gateway_unresponsive", 502, unknown, 0, "gateway_unresponsive answered HTTP 502 (want 504)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, Disagreement(ReportedOf(tt.state, tt.status, []byte(tt.body)), tt.moved))
		})
	}
}

// A gateway whose process ended keeps its last counts; the next process counts from zero.
func TestLedger(t *testing.T) {
	t.Parallel()
	l := NewLedger(Actuations{"GW-1": {1: 2, 2: 0}, "GW-2": {7: 1}})
	assert.Equal(t, Actuations{}, l.Moved(Actuations{"GW-1": {1: 2, 2: 0}, "GW-2": {7: 1}}), "nothing moved since the baseline")

	l.Ended("GW-1", map[int]int{1: 3, 2: 1})
	assert.Equal(t, Actuations{"GW-1": {1: 1, 2: 1}}, l.Moved(Actuations{"GW-1": {1: 0, 2: 0}, "GW-2": {7: 1}}),
		"the ended process's opens since the baseline")
	assert.Equal(t, Actuations{"GW-1": {1: 1, 2: 2}, "GW-2": {7: 1}}, l.Moved(Actuations{"GW-1": {2: 1}, "GW-2": {7: 2}}),
		"the new process's opens add to them")

	l.Ended("GW-1", map[int]int{2: 1, 3: 1})
	assert.Equal(t, Actuations{"GW-1": {1: 1, 2: 2, 3: 1}}, l.Moved(Actuations{"GW-1": {}, "GW-2": {7: 1}}),
		"a second restart counts its process from zero")
}

func TestLogged(t *testing.T) {
	t.Parallel()
	log := strings.Join([]string{
		`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"door opened","attempts":1,"lockerId":1005,"name":"A05","via":"maintenance"}`,
		`gw-0001    | time=2026-01-01T00:00:01Z level=INFO msg="door opened" attempts=1 lockerId=1005 name=A05 via=maintenance`,
		`gw-0002    | time=2026-01-01T00:00:01Z level=INFO msg="door opened" attempts=2 lockerId=2001 name=A01 via=transaction`,
		`gw-0002    | time=2026-01-01T00:00:02Z level=INFO msg="door open confirmed after a restart: the door reads open" lockerId=2002`,
		`{"level":"ERROR","msg":"door open failed","lockerId":1006}`,
		`not a log line`,
	}, "\n")
	got, err := Logged(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, map[int]int{1005: 2, 2001: 1}, got)
}
