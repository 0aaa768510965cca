package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// PoolCollector exports the pgx pool's statistics, read at scrape time, so an operator sees
// a saturated pool (every connection acquired, requests waiting for one) before it turns
// into 503s:
//
//	lockernet_db_pool_max_connections                   gauge   the pool's size
//	lockernet_db_pool_connections{state}                gauge   acquired, idle, constructing
//	lockernet_db_pool_acquires_total                    counter connections handed out
//	lockernet_db_pool_empty_acquires_total              counter acquires that had to wait for a free connection
//	lockernet_db_pool_empty_acquire_wait_seconds_total  counter time spent in those waits
//	lockernet_db_pool_canceled_acquires_total           counter acquires given up (the caller's context ended)
func (s *Store) PoolCollector() prometheus.Collector { return &poolCollector{s: s} }

type poolCollector struct{ s *Store }

var (
	poolMaxDesc = prometheus.NewDesc("lockernet_db_pool_max_connections",
		"Size of the process's Postgres connection pool.", nil, nil)
	poolConnsDesc = prometheus.NewDesc("lockernet_db_pool_connections",
		"Postgres pool connections by state (acquired, idle, constructing).", []string{"state"}, nil)
	poolAcquiresDesc = prometheus.NewDesc("lockernet_db_pool_acquires_total",
		"Connections acquired from the Postgres pool.", nil, nil)
	poolEmptyDesc = prometheus.NewDesc("lockernet_db_pool_empty_acquires_total",
		"Acquires that waited because every connection of the pool was in use.", nil, nil)
	poolEmptyWaitDesc = prometheus.NewDesc("lockernet_db_pool_empty_acquire_wait_seconds_total",
		"Time spent waiting for a connection by acquires that found the pool empty.", nil, nil)
	poolCanceledDesc = prometheus.NewDesc("lockernet_db_pool_canceled_acquires_total",
		"Acquires canceled by their context before they got a connection.", nil, nil)
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolMaxDesc, poolConnsDesc, poolAcquiresDesc, poolEmptyDesc, poolEmptyWaitDesc, poolCanceledDesc} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.pool.Stat()
	ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(st.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(st.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(st.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(poolAcquiresDesc, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolEmptyDesc, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(poolEmptyWaitDesc, prometheus.CounterValue, st.EmptyAcquireWaitTime().Seconds())
	ch <- prometheus.MustNewConstMetric(poolCanceledDesc, prometheus.CounterValue, float64(st.CanceledAcquireCount()))
}

// ExpiryBacklog returns how many reservations and locker holds are past their expiry
// without having been written back, and how long ago the oldest of them expired. Reads
// already treat them as free; a growing age means the expiry workflows (and the sweeper
// behind them) are not keeping up.
func (s *Store) ExpiryBacklog(ctx context.Context) (count int, oldest time.Duration, err error) {
	var secs float64
	err = s.db.QueryRow(ctx, `
		WITH overdue AS (
		    SELECT expires_at AS at FROM reservations WHERE status = 'active' AND expires_at <= now()
		    UNION ALL
		    SELECT hold_expires_at FROM lockers WHERE status IN (`+lapsingSQL+`) AND hold_expires_at <= now())
		SELECT count(*), coalesce(extract(epoch FROM now() - min(at)), 0) FROM overdue`).Scan(&count, &secs)
	if err != nil {
		return 0, 0, fmt.Errorf("expiry backlog: %w", translate(err))
	}
	return count, time.Duration(secs * float64(time.Second)), nil
}

// GatewaySeen is when the cloud last heard from an enabled gateway (zero: never).
type GatewaySeen struct {
	Serial     string
	LocationID int64
	LastSeen   time.Time
}

// GatewaysLastSeen lists the enabled gateways with the time each last answered.
func (s *Store) GatewaysLastSeen(ctx context.Context) ([]GatewaySeen, error) {
	return listRows(ctx, s, "gateways last seen", func(r pgx.CollectableRow) (GatewaySeen, error) {
		var g GatewaySeen
		return g, r.Scan(&g.Serial, &g.LocationID, &g.LastSeen)
	}, `
		SELECT serial, location_id, coalesce(last_seen_at, 'epoch') FROM gateways WHERE disabled_at IS NULL ORDER BY serial`)
}
