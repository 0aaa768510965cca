package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/deployments"
	"github.com/lockernet/lockernet/internal/temporalclient"
)

// deploymentCmd shows and changes which build of the worker deployment runs what (decision
// 0019; docs/runbook.md, "Deploy a build"):
//
//	lockernet-admin deployment status
//	lockernet-admin deployment set-current -build ID [-wait 2m]
//	lockernet-admin deployment ramp -build ID -percent N
//	lockernet-admin deployment rollback
//
// It reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and LOCKERNET_DEPLOYMENT_NAME.
func deploymentCmd(ctx context.Context, env *adminEnv, args []string) error {
	const usage = "usage: deployment status | set-current -build ID [-wait D] | ramp -build ID -percent N | rollback"
	if len(args) == 0 {
		return errors.New(usage)
	}
	var run func(context.Context, *deployments.Admin) error
	fs := flag.NewFlagSet("deployment "+args[0], flag.ContinueOnError)
	build := fs.String("build", "", "the build id (deployment status lists them)")
	switch args[0] {
	case "status":
		run = func(ctx context.Context, a *deployments.Admin) error {
			st, err := a.Status(ctx)
			if err != nil {
				return err
			}
			printDeployment(env, st)
			return nil
		}
	case "set-current":
		wait := fs.Duration("wait", 0, "retry until the build's workers have polled every task queue, for up to this long")
		run = func(ctx context.Context, a *deployments.Admin) error {
			if *build == "" {
				return errors.New("deployment set-current needs -build ID")
			}
			var ch deployments.Change
			var err error
			if *wait > 0 {
				ch, err = a.SetCurrentWhenPolled(ctx, *build, *wait)
			} else {
				ch, err = a.SetCurrent(ctx, *build)
			}
			if err != nil {
				return err
			}
			printChange(env, a, ch)
			return nil
		}
	case "ramp":
		percent := fs.Float64("percent", -1, "the share of new workflow runs (and of auto-upgrade runs' next tasks) the build receives, 0-100")
		run = func(ctx context.Context, a *deployments.Admin) error {
			if *build == "" || *percent < 0 {
				return errors.New("deployment ramp needs -build ID and -percent N")
			}
			ch, err := a.Ramp(ctx, *build, float32(*percent))
			if err != nil {
				return err
			}
			printChange(env, a, ch)
			return nil
		}
	case "rollback":
		run = func(ctx context.Context, a *deployments.Admin) error {
			ch, err := a.Rollback(ctx)
			if err != nil {
				return err
			}
			printChange(env, a, ch)
			return nil
		}
	default:
		return errors.New(usage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] != "set-current" && args[0] != "ramp" && *build != "" {
		return fmt.Errorf("deployment %s takes no -build", args[0])
	}
	if *build != "" && !config.ValidBuildID(*build) {
		return fmt.Errorf("-build %q is not a build id", *build)
	}
	tc, err := temporalclient.Dial(ctx, env.cfg.TemporalAddress, env.cfg.TemporalNS, env.logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	host, _ := os.Hostname()
	return run(ctx, &deployments.Admin{Client: tc, Namespace: env.cfg.TemporalNS, Name: env.cfg.DeploymentName,
		Identity: "lockernet-admin@" + host})
}

func printDeployment(env *adminEnv, st deployments.Status) {
	fmt.Fprintf(env.out, "deployment %s\n  current  %s\n", st.Name, orUnversioned(st.Current))
	if st.Ramping != "" {
		fmt.Fprintf(env.out, "  ramping  %s at %v%% of new runs\n", st.Ramping, st.RampPercent)
	}
	if st.Propagating {
		fmt.Fprintln(env.out, "  (the last change is still reaching the task queues)")
	}
	tw := tabwriter.NewWriter(env.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nBUILD\tSTATUS\tCREATED\tLAST CURRENT\tTASK QUEUES")
	for _, v := range st.Versions {
		last := "never"
		if !v.LastCurrentAt.IsZero() {
			last = v.LastCurrentAt.UTC().Format(time.RFC3339)
		}
		queues := strings.Join(v.TaskQueues, ",")
		if queues == "" {
			queues = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.BuildID, v.Status, v.CreatedAt.UTC().Format(time.RFC3339), last, queues)
	}
	_ = tw.Flush()
}

func printChange(env *adminEnv, a *deployments.Admin, ch deployments.Change) {
	switch ch.What {
	case "current":
		if ch.From == ch.To {
			fmt.Fprintf(env.out, "build %s is already current in deployment %s\n", ch.To, a.Name)
			return
		}
		if ch.From == "" {
			fmt.Fprintf(env.out, "build %s is current in deployment %s (was unversioned)\n", ch.To, a.Name)
			return
		}
		fmt.Fprintf(env.out, "build %s is current in deployment %s (was %s); runs pinned to %s finish there: keep its workers until status shows it drained\n",
			ch.To, a.Name, ch.From, ch.From)
	case "ramp":
		fmt.Fprintf(env.out, "build %s receives %v%% of new runs in deployment %s (current: %s)\n", ch.To, ch.Percent, a.Name, orUnversioned(ch.From))
	case "ramp stopped":
		fmt.Fprintf(env.out, "build %s no longer ramps in deployment %s; new runs go to %s\n", ch.From, a.Name, orUnversioned(ch.To))
	}
}

func orUnversioned(build string) string {
	if build == "" {
		return "unversioned"
	}
	return build
}
