package activities

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/store"
)

// GatewaySeenStore lists when each gateway last answered the cloud.
type GatewaySeenStore interface {
	GatewaysLastSeen(ctx context.Context) ([]store.GatewaySeen, error)
}

var gatewaySeenDesc = prometheus.NewDesc("lockernet_gateway_last_seen_timestamp_seconds",
	"When the cloud last heard from each enabled gateway (its health check or any request's answer), Unix seconds; 0 = never.",
	[]string{"gateway", "location_id"}, nil)

// NewGatewaySeenCollector exports when each enabled gateway last answered, read from
// Postgres at scrape time (bounded to 2 s): the gateway sync and every request's outcome
// keep it fresh, so "time() - it > 120" is the cloud's own "offline" (DESIGN §6). A failed
// read is logged and leaves the series out of that scrape.
func NewGatewaySeenCollector(st GatewaySeenStore, logger *slog.Logger) prometheus.Collector {
	return &scrapeCollector[[]store.GatewaySeen]{
		descs: []*prometheus.Desc{gatewaySeenDesc}, what: "gateways last seen", logger: logger,
		read: func(ctx context.Context) ([]store.GatewaySeen, error) { return st.GatewaysLastSeen(ctx) },
		emit: func(gws []store.GatewaySeen, ch chan<- prometheus.Metric) {
			for _, g := range gws {
				var ts float64
				if g.LastSeen.After(time.Unix(0, 0)) {
					ts = float64(g.LastSeen.UnixMilli()) / 1000
				}
				ch <- prometheus.MustNewConstMetric(gatewaySeenDesc, prometheus.GaugeValue, ts, g.Serial, strconv.FormatInt(g.LocationID, 10))
			}
		},
	}
}
