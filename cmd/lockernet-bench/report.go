package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

type report struct {
	started time.Time
	args    []string
	options options

	idle, loaded map[string]float64
	search       *searchResult
	flow         *flowResult
	expiry       *expiryResult
	proxy        *proxyResult
	tracing      *tracingResult
	webhooks     *webhookResult
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, v, _ := strings.Cut(l, ":")
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		mem = strings.Join(strings.Fields(first)[1:], " ")
	}
	return fmt.Sprintf("%d cores (%s), %s memory, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# Benchmarks")
	w("")
	cmd := "`make bench`"
	if len(r.args) > 0 {
		cmd += " (`lockernet-bench " + strings.Join(r.args, " ") + "`)"
	}
	w("Measured by %s against the `make run` stack on this machine, %s, at commit %s.",
		cmd, r.started.UTC().Format("2006-01-02 15:04 UTC"), commit())
	w("")
	w("Machine: %s. The load generator, the apiserver, the worker, the embedded Temporal server (SQLite) and PostgreSQL share it.", machine())
	w("")
	if p := r.proxy; p != nil {
		w("## Gateway cloud API over the gateway's local API")
		w("")
		w("The same locker read and locker open of %s at %.0f requests/s for %s each, straight to the gateway's local API (the floor) "+
			"and through the gateway cloud API (a gateway-request workflow per call, eager start). Latency from the scheduled start (open loop).", p.Gateway, p.Rate, p.Duration)
		w("")
		w(summaryHeader)
		w(p.DirectRead.row())
		w(p.CloudRead.row())
		w(p.DirectOpen.row())
		w(p.CloudOpen.row())
		w("")
		w("Added by the cloud: read p50 %s, p99 %s; open p50 %s, p99 %s. Target p50 ≤ 5 ms and p99 ≤ 25 ms: read %s, open %s.",
			ms(p.ReadAdded50), ms(p.ReadAdded99), ms(p.OpenAdded50), ms(p.OpenAdded99),
			verdict(p.ReadAdded50 <= 5*time.Millisecond && p.ReadAdded99 <= 25*time.Millisecond),
			verdict(p.OpenAdded50 <= 5*time.Millisecond && p.OpenAdded99 <= 25*time.Millisecond))
		w("")
		if len(p.Phases) > 0 {
			w("Where a cloud call spends its time inside the apiserver (`Server-Timing`): *auth* checks the key and counts it against its rate limit, " +
				"*store* finds the gateway and stores the request, *start* starts its workflow (eager: the answer carries the first workflow task), " +
				"*wait* lasts until the worker has called the gateway and stored the outcome.")
			w("")
			w(summaryHeader)
			for _, name := range []string{p.CloudRead.Name, p.CloudOpen.Name} {
				for _, s := range p.Phases[name] {
					s.Name = name + ": " + s.Name
					w(s.row())
				}
			}
			w("")
		}
	}
	if r.tracing != nil {
		r.tracing.markdown(w)
	}
	if s := r.search; s != nil {
		w("## Location search (%d generated locations)", s.Locations)
		w("")
		w("In-area searches of 0.2° × 0.2° (about 20 × 20 km) and closest-location searches at random points, one at a time. "+
			"*server* is the apiserver's own time (`Server-Timing`), *client* includes HTTP on loopback. The in-area searches returned %d locations in all; %d closest searches found nothing within 20 km (404).",
			s.InAreaResults, s.ClosestMisses)
		w("")
		w(summaryHeader)
		w(s.InAreaServer.row())
		w(s.InArea.row())
		w(s.ClosestServer.row())
		w(s.Closest.row())
		w("")
		w("Target p50 ≤ 2 ms server time: in-area %s (%s), closest %s (%s).", ms(s.InAreaServer.P50), verdict(s.InAreaServer.P50 <= 2*time.Millisecond),
			ms(s.ClosestServer.P50), verdict(s.ClosestServer.P50 <= 2*time.Millisecond))
		w("")
	}
	if f := r.flow; f != nil {
		w("## Tower flow: reservation + drop-off token")
		w("")
		w("Open-loop load at %.0f flows/s for %s, each flow on a fresh locker; a flow's latency runs from its scheduled start "+
			"to the drop-off token's answer (so queueing in the client counts). Achieved: **%.0f flows/s**; %d flows not sent because 512 were already in flight.",
			f.Rate, f.Duration, f.Achieved, f.Skipped)
		w("")
		w(summaryHeader)
		w(f.Flow.row())
		w(f.Reserve.row())
		w(f.Token.row())
		w("")
		w("Target ≥ 300 flows/s with p99 ≤ 100 ms: %.0f flows/s, p99 %s (%s).", f.Achieved, ms(f.Flow.P99),
			verdict(f.Achieved >= 0.97*300 && f.Flow.P99 <= 100*time.Millisecond))
		w("")
		w("Each flow starts two workflows (reservation and token) through the outbox. At the end of the load %d workflow starts were queued; "+
			"Temporal started them at %.0f a second, all of them %s after the load (extrapolated beyond the first minute).",
			f.OutboxBacklog, f.DrainRate, f.OutboxDrain.Round(time.Second))
		w("")
	}
	if e := r.expiry; e != nil {
		w("## Expiry fidelity: %d reservations expiring together", e.Reservations)
		w("")
		w("All reservations were made to expire at the same second (%s; each one's own expiry differs by the time its request took). "+
			"The load tool read every bench tower's lockers through the API over and over from a second before, and noted when each locker was first seen available, against its own expiry:",
			e.ExpiresAt.UTC().Format(time.TimeOnly))
		w("")
		w(summaryHeader)
		w(e.Freed.row())
		w("")
		w("Target: every locker free within 1 s of its expiry: %d of %d (%s) — reads and new reservations count a lapsed hold as free from its second. "+
			"The workflows' write-back (the reservation row marked expired, the locker row released) is later; it finished %s after the expiry:",
			e.ReadAvailable, e.Reservations-e.Failed, verdict(e.ReadAvailable >= e.Reservations-e.Failed), e.AllWrittenAfter.Round(time.Second))
		w("")
		w(summaryHeader)
		w(e.WriteBack.row())
		w("")
	}
	if wh := r.webhooks; wh != nil {
		wh.markdown(w)
	}
	if r.idle != nil {
		w("## Footprint (resident memory)")
		w("")
		w("| process | idle | peak under the flow load |")
		w("|---|---|---|")
		for _, p := range []string{"apiserver", "worker"} {
			w("| %s | %s | %s |", p, mib(r.idle[p]), mib(r.loaded[p]))
		}
		w("")
	}
	return b.String()
}
