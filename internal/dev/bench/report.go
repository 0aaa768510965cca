package bench

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

type report struct {
	started time.Time
	args    []string
	options options
	shapes  []*shapeReport
	engine  *engineResult
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

// writer appends one formatted line to the report.
type writer func(format string, a ...any)

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("# Benchmarks")
	w("")
	cmd := "`make bench`"
	if len(r.args) > 0 {
		cmd += " (`lockernet-bench " + strings.Join(r.args, " ") + "`)"
	}
	w("Measured by %s on this machine, %s, at commit %s.", cmd, r.started.UTC().Format("2006-01-02 15:04 UTC"), commit())
	w("")
	w("Machine: %s. The load generator, every process of the shape measured and PostgreSQL share it.", machine())
	w("")
	if len(r.shapes) > 1 {
		w("Both shapes in one run: the cluster shape first — the bench starts it (`bin/dev/devstack -cluster` on a database, data dir and ports of its own), " +
			"measures it and stops it — then the running `make run` stack, which stays up and idle meanwhile. That order keeps the workflows one shape's " +
			"tower flow leaves behind (their timers fire for ten minutes) off the other shape's figures.")
		w("")
	}
	w("Sustained means held for a whole step of at least %s: the tower flow with the outbox lag (the age of the oldest workflow start not yet "+
		"handed to Temporal, sampled every 0.5 s) at p99 ≤ 1 s, no more than a second of workflow starts queued in Temporal at the end, the reservations of the load's last second ended by a second after it, every flow answered "+
		"(no error, no 5xx) and none held back by the load generator; the bare workflow with every start answered, none held back, and fewer than a "+
		"second of starts not completed at the end. Steps rise until one is not held, then (-refine, %.0f %% here) halve the gap between the highest "+
		"rate held and the lowest not held until the two are that close; figures are as measured, never rounded up.", sustainWindow, 100*r.options.refine)
	w("")
	if r.engine != nil {
		r.engine.markdown(w, r.options.step)
	}
	if len(r.shapes) > 0 {
		r.summary(w)
	}
	for _, sr := range r.shapes {
		sr.markdown(w)
	}
	return b.String()
}

// summary is the side-by-side table of the headline figures, one column per shape.
func (r *report) summary(w writer) {
	if len(r.shapes) > 1 {
		w("## Both shapes side by side")
	} else {
		w("## Summary")
	}
	w("")
	head, sep := "| |", "|---|"
	for _, sr := range r.shapes {
		head += " " + sr.shape.title + " |"
		sep += "---|"
	}
	w("%s", head)
	w("%s", sep)
	for _, row := range summaryRows() {
		line := "| " + row.name + " |"
		for _, sr := range r.shapes {
			v := "not measured"
			if sr.err == "" {
				v = row.cell(sr)
			}
			line += " " + v + " |"
		}
		w("%s", line)
	}
	w("")
}

// summaryRow is one row of the summary: its name and how a shape's column reads.
type summaryRow struct {
	name string
	cell func(sr *shapeReport) string
}

// summaryRows are the summary's rows, in order.
func summaryRows() []summaryRow {
	return []summaryRow{
		{"tower flow sustained (reservation + drop-off token: two workflow starts each)", (*shapeReport).flowSustainedCell},
		{"first flow step not held", (*shapeReport).flowFirstNotHeldCell},
		{"Temporal alone: bare workflows kept up with (eager start, one local activity)", (*shapeReport).temporalSustainedCell},
		{"bare eager start p50 at 50/s", (*shapeReport).bareStartAt50Cell},
		{"gateway proxy `start` phase p50, read / open", (*shapeReport).proxyStartPhaseCell},
		{"gateway proxy, added by the cloud p50 / p99: read; open", (*shapeReport).proxyAddedCell},
		{"gateway proxy, bare eager start beside it p50 / p99 (same rate, same server)", (*shapeReport).proxyBareCell},
		{"gateway proxy reads sustained", (*shapeReport).proxyReadsSustainedCell},
		{"location search, server p50: in-area / closest", (*shapeReport).searchServerCell},
		{"expiry: lockers read free within 1 s of expiry", (*shapeReport).expiryFreeOnTimeCell},
		{"webhooks: delivered of recorded; p99 committed → delivered", (*shapeReport).webhooksDeliveredCell},
		{"webhook deliveries sustained", (*shapeReport).webhooksSustainedCell},
		{"Temporal alone, started as a webhook delivery is: kept up with", (*shapeReport).temporalDeliverySustainedCell},
		{"Temporal alone, the tower flow's shape: flows kept up with", (*shapeReport).temporalFlowSustainedCell},
		{"5xx answers, all scenarios", (*shapeReport).serverErrorCountCell},
		{"scenarios that failed", (*shapeReport).failedScenariosCell},
	}
}

// flowSustainedCell is the summary's row "tower flow sustained (reservation + drop-off token: two workflow starts each)".
func (sr *shapeReport) flowSustainedCell() string {
	f := sr.flow
	if f == nil || len(f.Steps) == 0 {
		return "not measured"
	}
	return ladderCell(f.Step, len(f.Steps), func(i int) float64 { return f.Steps[i].Rate }, f.Sustained,
		fmt.Sprintf("**%.0f flows/s** (%.0f workflow starts/s)", f.Sustained, 2*f.Sustained))
}

// flowFirstNotHeldCell is the summary's row "first flow step not held".
func (sr *shapeReport) flowFirstNotHeldCell() string {
	f := sr.flow
	if f == nil || len(f.Steps) == 0 {
		return "not measured"
	}
	last := f.Steps[len(f.Steps)-1]
	if last.Held {
		return "none: every step offered was held"
	}
	return fmt.Sprintf("%.0f flows/s: %s", last.Rate, strings.Join(last.Why, "; "))
}

// temporalSustainedCell is the summary's row "Temporal alone: bare workflows kept up with (eager start, one local activity)".
func (sr *shapeReport) temporalSustainedCell() string {
	return bareCell(sr.temporal, "starts/s")
}

// bareStartAt50Cell is the summary's row "bare eager start p50 at 50/s".
func (sr *shapeReport) bareStartAt50Cell() string {
	if sr.temporal == nil {
		return "not measured"
	}
	if s, ok := sr.temporal.startAt50(); ok {
		return ms(s.P50)
	}
	return "no 50/s step"
}

// proxyStartPhaseCell is the summary's row "gateway proxy `start` phase p50, read / open".
func (sr *shapeReport) proxyStartPhaseCell() string {
	if sr.proxy == nil {
		return "not measured"
	}
	return sr.proxy.startPhase(sr.proxy.CloudRead.Name) + " / " + sr.proxy.startPhase(sr.proxy.CloudOpen.Name)
}

// proxyAddedCell is the summary's row "gateway proxy, added by the cloud p50 / p99: read; open".
func (sr *shapeReport) proxyAddedCell() string {
	p := sr.proxy
	if p == nil {
		return "not measured"
	}
	return fmt.Sprintf("%s / %s; %s / %s", ms(p.ReadAdded50), ms(p.ReadAdded99), ms(p.OpenAdded50), ms(p.OpenAdded99))
}

// proxyBareCell is the summary's row "gateway proxy, bare eager start beside it p50 / p99 (same rate, same server)".
func (sr *shapeReport) proxyBareCell() string {
	p := sr.proxy
	if p == nil || p.Bare.Count == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%s / %s", ms(p.Bare.P50), ms(p.Bare.P99))
}

// proxyReadsSustainedCell is the summary's row "gateway proxy reads sustained".
func (sr *shapeReport) proxyReadsSustainedCell() string {
	pr := sr.proxyRates
	if pr == nil {
		return "not measured"
	}
	if pr.Sustained == 0 {
		return "**none**"
	}
	return fmt.Sprintf("**%.0f calls/s**", pr.Sustained)
}

// searchServerCell is the summary's row "location search, server p50: in-area / closest".
func (sr *shapeReport) searchServerCell() string {
	if sr.search == nil {
		return "not measured"
	}
	return ms(sr.search.InAreaServer.P50) + " / " + ms(sr.search.ClosestServer.P50)
}

// expiryFreeOnTimeCell is the summary's row "expiry: lockers read free within 1 s of expiry".
func (sr *shapeReport) expiryFreeOnTimeCell() string {
	e := sr.expiry
	if e == nil {
		return "not measured"
	}
	return fmt.Sprintf("%d of %d", e.ReadAvailable, e.Reservations-e.Failed)
}

// webhooksDeliveredCell is the summary's row "webhooks: delivered of recorded; p99 committed → delivered".
func (sr *shapeReport) webhooksDeliveredCell() string {
	h := sr.webhooks
	if h == nil {
		return "not measured"
	}
	return fmt.Sprintf("%d of %d; %s", h.Delivered, h.Recorded, ms(h.Latency.P99))
}

// webhooksSustainedCell is the summary's row "webhook deliveries sustained".
func (sr *shapeReport) webhooksSustainedCell() string {
	h := sr.webhookRates
	if h == nil {
		return "not measured"
	}
	return ladderCell(h.Step, len(h.Steps), func(i int) float64 { return h.Steps[i].Rate }, h.Sustained,
		fmt.Sprintf("**%.0f/s**", h.Sustained))
}

// temporalDeliverySustainedCell is the summary's row "Temporal alone, started as a webhook delivery is: kept up with".
func (sr *shapeReport) temporalDeliverySustainedCell() string {
	return bareCell(sr.temporalDelivery, "starts/s")
}

// temporalFlowSustainedCell is the summary's row "Temporal alone, the tower flow's shape: flows kept up with".
func (sr *shapeReport) temporalFlowSustainedCell() string {
	return bareCell(sr.temporalFlow, "flows/s")
}

// serverErrorCountCell is the summary's row "5xx answers, all scenarios".
func (sr *shapeReport) serverErrorCountCell() string {
	n := 0
	for _, byCode := range sr.serverErrors {
		for _, c := range byCode {
			n += c
		}
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("**%d**", n)
}

// failedScenariosCell is the summary's row "scenarios that failed".
func (sr *shapeReport) failedScenariosCell() string {
	if len(sr.failed) == 0 {
		return "none"
	}
	return "**" + strings.Join(slices.Sorted(maps.Keys(sr.failed)), ", ") + "**"
}

// bareCell is the summary cell of a Temporal-alone ladder: the rate kept up with, in unit.
func bareCell(t *bareResult, unit string) string {
	if t == nil || len(t.Steps) == 0 {
		return "not measured"
	}
	return ladderCell(t.Step, len(t.Steps), func(i int) float64 { return t.Steps[i].Rate }, t.Sustained,
		fmt.Sprintf("**%.0f %s**", t.Sustained, unit))
}

// ladderCell is the summary cell of a ladder of n steps of step each: held, the highest rate
// sustained as its row writes it, or when none was, the rates of the steps offered.
func ladderCell(step time.Duration, n int, rate func(int) float64, sustained float64, held string) string {
	if sustained == 0 {
		return fmt.Sprintf("**none** of the %s steps (%s)", step, stepRates(n, rate))
	}
	return held
}

func stepRates(n int, rate func(int) float64) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf("%.0f/s", rate(i)))
	}
	return strings.Join(parts, ", ")
}

// markdown writes one shape's section.
func (sr *shapeReport) markdown(w writer) {
	w("## %s", sr.shape.title)
	w("")
	w("%s.", strings.ToUpper(sr.shape.describe[:1])+sr.shape.describe[1:])
	for _, n := range sr.notes {
		w("%s", n)
	}
	w("")
	if sr.err != "" {
		w("**Not measured**: %s", firstLine(sr.err))
		w("")
		return
	}
	for _, name := range slices.Sorted(maps.Keys(sr.failed)) {
		w("**The %s scenario failed**: %s", name, firstLine(sr.failed[name]))
		w("")
	}
	if p := sr.proxy; p != nil {
		p.markdown(w, sr.temporal)
	}
	if sr.tracing != nil {
		sr.tracing.markdown(w)
	}
	if s := sr.search; s != nil {
		s.markdown(w)
	}
	if t := sr.temporal; t != nil {
		t.markdown(w)
	}
	if f := sr.flow; f != nil {
		f.markdown(w)
	}
	if pr := sr.proxyRates; pr != nil {
		pr.markdown(w, sr.temporal, proxyRatesTarget(sr.shape.key))
	}
	if e := sr.expiry; e != nil {
		e.markdown(w)
	}
	if pw := sr.windows; pw != nil {
		pw.markdown(w)
	}
	if wh := sr.webhooks; wh != nil {
		wh.markdown(w)
	}
	if wr := sr.webhookRates; wr != nil {
		wr.markdown(w, sr.temporalDelivery)
	}
	if t := sr.temporalDelivery; t != nil {
		t.markdown(w)
	}
	if t := sr.temporalFlow; t != nil {
		t.markdown(w)
	}
	if sr.idle != nil {
		w("### Footprint (resident memory)")
		w("")
		w("| process | idle | peak under the flow steps |")
		w("|---|---|---|")
		for _, p := range slices.Sorted(maps.Keys(sr.idle)) {
			peak := "not measured"
			if v, ok := sr.loaded[p]; ok {
				peak = mib(v)
			}
			w("| %s | %s | %s |", p, mib(sr.idle[p]), peak)
		}
		w("")
	}
	w("### 5xx answers")
	w("")
	w("Every answer of 500 or more the load generator got, by scenario (overload is a 503 with `Retry-After`; nothing may be a 500).")
	w("")
	w("| scenario | 5xx answers |")
	w("|---|---|")
	for _, name := range sr.ran {
		w("| %s | %s |", name, statusList(sr.serverErrors[name]))
	}
	w("")
}

func statusList(byCode map[int]int) string {
	if len(byCode) == 0 {
		return "0"
	}
	var parts []string
	n := 0
	for _, code := range slices.Sorted(maps.Keys(byCode)) {
		parts = append(parts, fmt.Sprintf("%d × %d", byCode[code], code))
		n += byCode[code]
	}
	return fmt.Sprintf("**%d** (%s)", n, strings.Join(parts, ", "))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// phase is the summary of one Server-Timing phase of a proxied operation.
func (p *proxyResult) phase(op, name string) summary {
	for _, s := range p.Phases[op] {
		if s.Name == name {
			return s
		}
	}
	return summary{Name: name}
}

// startPhase is the p50 of an operation's start phase, or says that no call started a
// workflow.
func (p *proxyResult) startPhase(op string) string {
	if s := p.phase(op, "start"); s.Count > 0 {
		return ms(s.P50)
	}
	return "no workflow started"
}

func (p *proxyResult) markdown(w writer, bare *bareResult) {
	w("### Gateway cloud API over the gateway's local API")
	w("")
	w("The same locker read and locker open of %s at %.0f requests/s for %s each, straight to the gateway's local API (the floor) "+
		"and through the gateway cloud API (the apiserver stores the request and starts its gateway-request workflow eagerly; the first send "+
		"runs inside the workflow's first task, on the apiserver's own gateway worker, and stores the outcome when the answer decides it, so the "+
		"workflow completes in that task; decisions 0012, 0018), "+
		"after untimed cloud reads for a tenth of that (warm connections). Latency from the scheduled start (open loop). Then a bare workflow "+
		"(one local activity) started eagerly on the same Temporal server at the same rate for as long: the engine's floor under every cloud call.", p.Gateway, p.Rate, p.Duration)
	w("")
	w(summaryHeader)
	w(p.DirectRead.row())
	w(p.CloudRead.row())
	w(p.DirectOpen.row())
	w(p.CloudOpen.row())
	if p.Bare.Count > 0 {
		w(p.Bare.row())
	}
	if p.Shape.Count > 0 {
		w(p.Shape.row())
	}
	w("")
	if p.Shape.Count > 0 {
		w("The last row is the engine's floor of the card's shape for a gateway request on the same server at the same rate: a workflow " +
			"started eagerly whose first task schedules one regular activity, dispatched eagerly to the same process, timed until that " +
			"activity runs. A gateway request's send cannot leave earlier than that; the bare start does not include the persisted " +
			"completion of the first task that an activity needs before it is handed out.")
		w("")
	}
	if p.Bare.Count > 0 {
		w("Added by the cloud: read p50 %s, p99 %s; open p50 %s, p99 %s. Target: added p50 ≤ the bare start's p50 + %s (%s), "+
			"added p99 ≤ its p99 + %s (%s): read %s, open %s.",
			ms(p.ReadAdded50), ms(p.ReadAdded99), ms(p.OpenAdded50), ms(p.OpenAdded99),
			ms(addedOverBare50), ms(p.Bare.P50+addedOverBare50), ms(addedOverBare99), ms(p.Bare.P99+addedOverBare99),
			verdict(p.met(p.ReadAdded50, p.ReadAdded99)), verdict(p.met(p.OpenAdded50, p.OpenAdded99)))
		if p.Shape.Count > 0 {
			w("")
			w("Added by the cloud beyond the activity-shape floor (what is the service's own, not the engine's): read p50 %s, p99 %s; "+
				"open p50 %s, p99 %s.", ms(p.ReadAdded50-p.Shape.P50), ms(p.ReadAdded99-p.Shape.P99),
				ms(p.OpenAdded50-p.Shape.P50), ms(p.OpenAdded99-p.Shape.P99))
		}
	} else {
		w("Added by the cloud: read p50 %s, p99 %s; open p50 %s, p99 %s. The bare start was not measured, so the target is not judged.",
			ms(p.ReadAdded50), ms(p.ReadAdded99), ms(p.OpenAdded50), ms(p.OpenAdded99))
	}
	w("")
	if len(p.Floors) > 0 {
		w("The round trips a cloud call adds, each alone at %.0f/s for %s on the same machine, timed from the call's start (the floor below the added figures: a call "+
			"makes one more HTTP exchange than a direct one and two Postgres commits, of which it waits for the flush of one on a read "+
			"and of both on an open):", p.Rate, p.FloorFor)
		w("")
		w(summaryHeader)
		for _, s := range p.Floors {
			w(s.row())
		}
		w("")
	}
	if len(p.Phases) == 0 {
		return
	}
	w("Where a cloud call spends its time inside the apiserver (`Server-Timing`): *store* checks the key and counts it against its rate limit, " +
		"finds the gateway and stores the request, in one round trip and one commit (a call that is not proxied, " +
		"such as a poll, names the key's check *auth* instead), *start* starts its workflow eagerly (Temporal persists the start and hands " +
		"the first workflow task back), *wait* lasts until the workflow's first task has completed, its send has run, the gateway has answered " +
		"and the outcome is stored (a second commit).")
	w("")
	w(summaryHeader)
	for _, name := range []string{p.CloudRead.Name, p.CloudOpen.Name} {
		for _, s := range p.Phases[name] {
			s.Name = name + ": " + s.Name
			w(s.row())
		}
	}
	w("")
	if bare != nil {
		if s, ok := bare.startAt50(); ok {
			w("Beside the *start* phase (read: %s, open: %s): a bare eager start on the same Temporal server at 50/s (below) had p50 %s, p99 %s.",
				p.startPhase(p.CloudRead.Name), p.startPhase(p.CloudOpen.Name), ms(s.P50), ms(s.P99))
			w("")
		}
	}
}

func (s *searchResult) markdown(w writer) {
	w("### Location search (%d generated locations)", s.Locations)
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

func (t *bareResult) markdown(w writer) {
	if t.Shape == shapeFlow {
		w("### Temporal alone: the tower flow's shape")
		w("")
		w("Per flow, as the outbox makes a tower flow's workflows: a reservation-shaped workflow started eagerly (it sets a timer and ends on a signal), "+
			"a token-shaped workflow started eagerly (it sets a timer and waits), and the reservation's signal sent with signal-with-start; each start "+
			"with three keyword search attributes (`OrganizationId`, `TowerId`, `LockerId`), reject-duplicate, by the bench's own worker and client "+
			"on `%s`, open loop, %s per offered rate of flows, each step from a quiet server. *start* is the three calls' latency; *completed/s* "+
			"counts the reservations that ended. It is Temporal's own cost of the card's tower flow (DESIGN: a workflow per reservation and per "+
			"token), before the service's Postgres and HTTP work.", bareQueue, t.Step)
		w("")
		t.table(w)
		return
	}
	if t.Shape == shapeDelivery {
		w("### Temporal alone: started as a webhook delivery is")
		w("")
		w("The bare workflow (one local activity, then done), started as the outbox starts a `WebhookDelivery`: with the delivery's input and its "+
			"three keyword search attributes (`OrganizationId`, `WebhookEndpointId`, `EventType`, DESIGN §10), reject-duplicate and use-existing, "+
			"eager, no execution timeout; by the bench's own worker and client on `%s`, open loop, %s per offered rate, each step from a quiet server. "+
			"It is Temporal's own cost of the card's delivery, before the service's Postgres and HTTP work.", bareQueue, t.Step)
		w("")
		t.table(w)
		return
	}
	w("### Temporal alone: bare workflows, eager start")
	w("")
	w("A workflow that runs one local activity and completes, started with `EnableEagerStart` by the bench's own worker and client on a task queue "+
		"of its own (`%s`) against the shape's Temporal server, open loop, %s per offered rate. *start* is the start call's latency; "+
		"*completed/s* counts the completions the server accepted during the step; *behind* is started less completed when the step ended. It runs last on the shape: driving the server past its knee leaves it busy "+
		"for minutes, which must not be measured as the tower flow's; so it may share the server with timers the flow and expiry scenarios left, "+
		"and its figures are a lower bound.", bareQueue, t.Step)
	w("")
	t.table(w)
}

// table is the steps' table and the rate kept up with.
func (t *bareResult) table(w writer) {
	w("| offered | started | eager | refused | not sent | start p50 | start p99 | completed/s | behind at the end | the rest done in | verdict |")
	w("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range t.Steps {
		rest := "—"
		switch {
		case s.NotDrained > 0:
			rest = fmt.Sprintf("%d not done after %s", s.NotDrained, s.DrainedIn.Round(time.Second))
		case s.Behind > 0:
			rest = s.DrainedIn.Round(100 * time.Millisecond).String()
		}
		w("| %.0f/s | %d | %d | %d | %d | %s | %s | %.1f | %d | %s | %s |", s.Rate, s.Started, s.Eager, s.Errors, s.Skipped,
			ms(s.Start.P50), ms(s.Start.P99), s.CompletedRate, s.Behind, rest, stepVerdict(s.Held, s.Kept, s.Why))
	}
	w("")
	if t.Sustained > 0 {
		w("Kept up with for a whole step: **%.0f starts/s**.", t.Sustained)
	} else {
		w("Kept up with for a whole step of at least %s: **none**.", sustainWindow)
	}
	w("")
}

func (f *flowResult) markdown(w writer) {
	w("### Tower flow: the rate sustained")
	w("")
	w("Open-loop tower flows (a reservation, then a drop-off token, on a fresh locker: two workflow starts through the outbox), %s per offered rate, "+
		"each step from a quiet system. A flow's latency runs from its scheduled start to the drop-off token's answer (so queueing in the client counts). "+
		"*outbox lag* is the age of the oldest workflow start waiting in the outbox, sampled every 0.5 s. *not ended* counts, of the "+
		"reservations of the flows answered in the load's last second, those whose workflow was still running a second after the load "+
		"(the drop-off token's signal ends it; a backlog of those signals' tasks waits where the task queue's backlog does not show it).", f.Step)
	w("")
	w("| offered | achieved | flows | failed | 5xx | not sent | flow p50 | flow p99 | reservation p99 | token p99 | outbox lag p50 | outbox lag p99 | outbox lag max | outbox at the end | Temporal tasks at the end | not ended | verdict |")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range f.Steps {
		w("| %.0f/s | %.1f/s | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d of %d | %s |", s.Rate, s.Achieved, s.Flow.Count, s.Flow.Errors,
			s.ServerErrors, s.Skipped, ms(s.Flow.P50), ms(s.Flow.P99), ms(s.Reserve.P99), ms(s.Token.P99),
			ms(s.Lag.P50), ms(s.Lag.P99), ms(s.Lag.Max), s.OutboxEnd, s.TasksEnd, s.NotEnded, s.LastSecond, stepVerdict(s.Held, s.Sustained, s.Why))
	}
	w("")
	if f.Sustained > 0 {
		w("Sustained: **%.0f flows/s** (%.0f workflow starts/s).", f.Sustained, 2*f.Sustained)
	} else {
		w("Sustained for a whole step of at least %s: **none**.", sustainWindow)
	}
	w("")
}

func (e *expiryResult) markdown(w writer) {
	w("### Expiry fidelity: %d reservations expiring together", e.Reservations)
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
