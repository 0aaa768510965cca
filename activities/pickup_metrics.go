package activities

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/store"
)

// PickupStatsStore reads the live pickup windows' figures.
type PickupStatsStore interface {
	PickupStats(ctx context.Context) (store.PickupStats, error)
}

var (
	parcelsLiveDesc = prometheus.NewDesc("lockernet_parcels_live",
		"Parcels in lockers under a pickup window, by location and window status (open, overdue, return_requested).",
		[]string{"location_id", "status"}, nil)
	pickupLagDesc = prometheus.NewDesc("lockernet_pickup_window_mark_lag_seconds",
		"How long ago the end of the oldest open window passed without its overdue mark (0 when none): the pickup-window workflows' lag.", nil, nil)
)

// NewPickupCollector exports the live parcels per location and status, and the overdue-mark lag,
// read from Postgres at scrape time (bounded to 2 s). A failed read is logged and leaves the
// series out of that scrape.
func NewPickupCollector(st PickupStatsStore, logger *slog.Logger) prometheus.Collector {
	return &scrapeCollector[store.PickupStats]{
		descs: []*prometheus.Desc{parcelsLiveDesc, pickupLagDesc}, what: "pickup windows", logger: logger,
		read: func(ctx context.Context) (store.PickupStats, error) { return st.PickupStats(ctx) },
		emit: func(s store.PickupStats, ch chan<- prometheus.Metric) {
			for _, l := range s.Live {
				ch <- prometheus.MustNewConstMetric(parcelsLiveDesc, prometheus.GaugeValue, float64(l.Count),
					strconv.FormatInt(l.LocationID, 10), l.Status)
			}
			ch <- prometheus.MustNewConstMetric(pickupLagDesc, prometheus.GaugeValue, s.MarkLag.Seconds())
		},
	}
}
