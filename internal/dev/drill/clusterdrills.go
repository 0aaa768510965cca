package drill

// The cluster drills run on the production shape of make run-cluster (clusterStack): the
// Temporal server as its own process on Postgres with 4 history shards, two apiservers and
// two workers behind nginx, and the dev stack's supervisor, which restarts what a drill
// kills. Clients go through nginx, the one public address.

// restartFigure reports the supervisor's restarts during the drill and checks that the
// killed child was restarted once and nothing else (reported only: a child that dies of
// the fault and comes back is not a failure as long as nothing is lost).
func restartFigure(r *result, sys *system, before map[string]int, killed string) {
	got := sys.cluster.restartsSince(before)
	r.figure("Supervisor restarts during the drill", "%s", counts(got))
	others := map[string]int{}
	for k, n := range got {
		if k != killed {
			others[k] = n
		}
	}
	if killed != "" {
		r.verify(got[killed] >= 1, "the supervisor restarted "+killed, "%d restarts", got[killed])
	}
	r.observe(len(others) == 0, "no other child died", "%s", counts(others))
}

// sweeperFigure reports whether the sweeper released anything during the drill (swept
// releases): the workflows' timers should have, well inside its 60 s grace.
func sweeperFigure(r *result, swept int) {
	r.observe(swept == 0, "the sweeper had nothing to release (the workflows did it)", "%d sweeps released something", swept)
}

// clusterSweeps is the cluster's sweeper releases since before.
func clusterSweeps(sys *system, before int) int {
	return sys.cluster.stack.logCount(sweeperReleased) - before
}

func orOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
