package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// sample collects latencies of one measured operation.
type sample struct {
	mu     sync.Mutex
	name   string
	values []time.Duration
	errors int
}

func newSample(name string) *sample { return &sample{name: name} }

func (s *sample) add(d time.Duration) {
	s.mu.Lock()
	s.values = append(s.values, d)
	s.mu.Unlock()
}

func (s *sample) fail() {
	s.mu.Lock()
	s.errors++
	s.mu.Unlock()
}

// summary is a sample reduced to what the report prints.
type summary struct {
	Name          string
	Count, Errors int
	P50, P95, P99 time.Duration
	Max           time.Duration
}

func (s *sample) summary() summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := slices.Clone(s.values)
	slices.Sort(v)
	out := summary{Name: s.name, Count: len(v), Errors: s.errors}
	if len(v) == 0 {
		return out
	}
	out.P50, out.P95, out.P99, out.Max = pct(v, 50), pct(v, 95), pct(v, 99), v[len(v)-1]
	return out
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func (s summary) row() string {
	return fmt.Sprintf("| %s | %d | %d | %s | %s | %s | %s |", s.Name, s.Count, s.Errors, ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max))
}

const summaryHeader = "| operation | n | errors | p50 | p95 | p99 | max |\n|---|---|---|---|---|---|---|"

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
