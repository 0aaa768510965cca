package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics live in a registry of their own, so several gateways can run in one
// process (tests, the dev stack).
type metrics struct {
	registry        *prometheus.Registry
	requestDuration *prometheus.HistogramVec
	doorOpens       *prometheus.CounterVec
	openAttempts    *prometheus.CounterVec
	alerts          *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_http_request_duration_seconds",
			Help:    "Local API request latency by route, method and status.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 40, 65},
		}, []string{"route", "method", "status"}),
		doorOpens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_door_opens_total",
			Help: "Door opens by outcome (opened, hardware_fault, controller_unavailable, controller_error, outcome_unknown, cancelled).",
		}, []string{"outcome"}),
		openAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_door_open_attempts_total",
			Help: "Open commands sent to lock controllers by result (ok, comm_error, timeout, hardware_fault, outcome_unknown, error, cancelled), " +
				"and door reads after an unconfirmed open (read_back_open, read_back_shut, read_back_failed).",
		}, []string{"result"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_alerts_total",
			Help: "Alerts raised by the watch of the lock controllers, by kind (door_ajar, forced_open, item_left, controller_offline, controller_online).",
		}, []string{"kind"}),
	}
	m.registry.MustRegister(m.requestDuration, m.doorOpens, m.openAttempts, m.alerts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
