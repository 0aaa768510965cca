package activities

import "github.com/prometheus/client_golang/prometheus"

// GatewayMetrics counts gateway requests by terminal state, where the outcome is decided.
type GatewayMetrics struct {
	terminals *prometheus.CounterVec
}

// NewGatewayMetrics registers the gateway-request metrics on reg.
func NewGatewayMetrics(reg prometheus.Registerer) *GatewayMetrics {
	m := &GatewayMetrics{terminals: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockernet_gateway_request_terminal_total",
		Help: "Gateway requests that reached a terminal state, by class and state.",
	}, []string{"class", "state"})}
	reg.MustRegister(m.terminals)
	return m
}

func (m *GatewayMetrics) terminal(class, state string) {
	if m != nil {
		m.terminals.WithLabelValues(class, state).Inc()
	}
}
