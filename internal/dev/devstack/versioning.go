package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/lockernet/lockernet/internal/deployments"
	"github.com/lockernet/lockernet/internal/temporalclient"
	"github.com/lockernet/lockernet/worker"
)

// Worker versioning in both shapes (decision 0019): the apiservers' and the workers' workers
// poll as one build of the worker deployment, and once they do, the stack makes that build
// the deployment's current version, so a newcomer's `make run` works as before and a rebuilt
// stack takes over from the previous build's runs by itself.

// stackVersioning says whether the stack's processes run versioned: unless
// LOCKERNET_WORKER_VERSIONING is set to something other than true.
func stackVersioning() bool {
	v, ok := os.LookupEnv("LOCKERNET_WORKER_VERSIONING")
	if !ok || v == "" {
		return true
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// stackBuildID is the build every service process of the stack polls as: LOCKERNET_BUILD_ID
// when set; else the revision the stack was built from when its work tree was clean (make
// run builds the stack and its processes together); else that revision (or "exe") and a
// hash of the apiserver and worker binaries, one id for the two even though each
// executable's own hash differs.
func stackBuildID(s Settings, binDir string) (string, error) {
	if s.BuildID != "" {
		return s.BuildID, nil
	}
	rev, dirty := worker.BuildRevision()
	if rev != "" && !dirty {
		return rev, nil
	}
	var paths []string
	for _, name := range []string{"apiserver", "worker"} {
		p, err := binary(binDir, name)
		if err != nil {
			return "", err
		}
		paths = append(paths, p)
	}
	h, err := worker.HashFiles(paths...)
	if err != nil {
		return "", fmt.Errorf("derive the stack's build id: %w", err)
	}
	if rev == "" {
		return "exe-" + h, nil
	}
	return rev + "-dirty-" + h, nil
}

// versioningEnv is what every service process is given so that they poll as one build.
func versioningEnv(s Settings, build string) []string {
	return []string{"LOCKERNET_WORKER_VERSIONING=true", "LOCKERNET_DEPLOYMENT_NAME=" + s.DeploymentName, "LOCKERNET_BUILD_ID=" + build}
}

// promoteBuild makes build the deployment's current version once its workers poll.
func promoteBuild(ctx context.Context, s Settings, temporalAddr, build string, logger *slog.Logger) error {
	tc, err := temporalclient.Dial(ctx, temporalAddr, s.TemporalNS, logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	a := &deployments.Admin{Client: tc, Namespace: s.TemporalNS, Name: s.DeploymentName, Identity: "devstack"}
	ch, err := a.SetCurrentWhenPolled(ctx, build, 90*time.Second)
	if err != nil {
		return fmt.Errorf("make build %s current: %w", build, err)
	}
	if ch.From != build {
		from := ch.From
		if from == "" {
			from = "unversioned"
		}
		logger.Info("worker deployment: this build is now current", "deployment", s.DeploymentName, "build", build, "previous", from)
	}
	return nil
}
