package bench

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
)

// rss reads process_resident_memory_bytes from a Prometheus endpoint.
func rss(ctx context.Context, a *api, metricsURL string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := a.http.HTTP().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "process_resident_memory_bytes ") {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, "process_resident_memory_bytes ")), 64)
		}
	}
	return 0, sc.Err()
}

func mib(b float64) string { return strconv.FormatFloat(b/(1<<20), 'f', 1, 64) + " MiB" }
