package devstack

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/lockernet/lockernet/internal/seed"
)

// writeTowerSimConfig provisions the simulated towers with their keys, as a factory would.
func writeTowerSimConfig(s Settings, creds seed.Credentials, towers []seed.Tower) error {
	return seed.WriteTowerSimConfig(filepath.Join(s.DataDir, "towersim.json"), creds.APIURL,
		filepath.Join(s.DataDir, "towersim"), creds, towers)
}

func printSummary(out io.Writer, s Settings, c seed.Credentials, credsPath string, took time.Duration) {
	fmt.Fprintf(out, `
Locker Network Service is up (%s).

  API              %s   (OpenAPI docs: %s/docs)
  Temporal Web UI  %s
  Tower simulator  %s
  Gateways         %s (sim %s), %s (sim %s)
  Worker health    http://%s/readyz
  Credentials      %s
  Data dir         %s (pids in run/)

Get a token:
  curl -s -u %s:%s -d grant_type=client_credentials %s/oauth/token

A crashed apiserver, worker, gateway or simulator is restarted. Press Ctrl-C to stop.
`, took.Round(100*time.Millisecond), c.APIURL, c.APIURL, orNone(c.TemporalUIURL, s.TemporalAddress), c.TowerSimURL,
		c.Gateways[0].URL, c.Gateways[0].SimURL, c.Gateways[1].URL, c.Gateways[1].SimURL,
		s.WorkerAddr, credsPath, s.DataDir, c.ServiceProvider.ClientID, c.ServiceProvider.ClientSecret, c.APIURL)
}

func orNone(ui, addr string) string {
	if ui == "" {
		return "(external cluster at " + addr + ")"
	}
	return ui
}
