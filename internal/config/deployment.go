package config

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
)

// Worker versioning (decision 0019):
//
//	LOCKERNET_WORKER_VERSIONING  true: every worker of the process (the worker's, the apiserver's
//	                             in-process ones) polls as a version of a Temporal worker deployment,
//	                             and each workflow type keeps to the version its registration says
//	                             (a gateway request stays on the build that started it) [false;
//	                             make run, make run-cluster and compose: true]
//	LOCKERNET_DEPLOYMENT_NAME    the worker deployment's name [lockernet]
//	LOCKERNET_BUILD_ID           this build's id within the deployment [the VCS revision the binary
//	                             was built from, with -dirty-<hash> for uncommitted changes; exe-<hash
//	                             of the executable> when the build recorded none, as in the Docker
//	                             images: set it there, one id for every process of a release]
//
// Off by default: a versioned worker takes no task until its build is made the deployment's
// current version (lockernet-admin deployment set-current), which the dev stack does on
// start and an operator does on a deploy (docs/runbook.md).

var (
	deploymentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$`)
	buildID        = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$`)
)

func (c *Config) loadDeployment() error {
	var err error
	if c.WorkerVersioning, err = strconv.ParseBool(env("LOCKERNET_WORKER_VERSIONING", "false")); err != nil {
		return fmt.Errorf("parse LOCKERNET_WORKER_VERSIONING: %w", err)
	}
	c.DeploymentName = env("LOCKERNET_DEPLOYMENT_NAME", "lockernet")
	if !deploymentName.MatchString(c.DeploymentName) {
		return fmt.Errorf("parse LOCKERNET_DEPLOYMENT_NAME: %q is not 1-100 letters, digits, '-' or '_' (Temporal refuses '.' and ':')", c.DeploymentName)
	}
	c.BuildID = os.Getenv("LOCKERNET_BUILD_ID")
	if c.BuildID != "" && !ValidBuildID(c.BuildID) {
		return fmt.Errorf("parse LOCKERNET_BUILD_ID: %q is not 1-100 letters, digits, '.', '_', '+' or '-', beginning with a letter or digit", c.BuildID)
	}
	return nil
}

// ValidBuildID says whether id may name a build of the deployment.
func ValidBuildID(id string) bool { return buildID.MatchString(id) }
