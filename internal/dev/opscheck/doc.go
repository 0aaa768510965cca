// Package opscheck holds the checks of the operations files in docker/ against the code:
// the Prometheus scrape config and alert rules (promtool check and promtool's rule unit
// tests) and the Grafana dashboard (valid JSON, and every expression of a panel or a rule
// names a metric the processes export). It has no code of its own; its tests run in CI.
package opscheck
