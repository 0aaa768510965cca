package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/lockernet/lockernet/internal/config"
)

// Deployment is the Temporal worker deployment version a worker polls as (decision 0019):
// the deployment's name and this build's id. With it, Temporal hands a workflow's tasks only
// to the workers of the version the workflow belongs to: a pinned run (a gateway request)
// never meets a worker of another build, an auto-upgrade run moves to the deployment's
// current version at its next task. The zero Deployment runs the worker unversioned.
type Deployment struct {
	Name    string
	BuildID string
}

// Versioned says whether a worker with this Deployment polls as a deployment version.
func (d Deployment) Versioned() bool { return d.BuildID != "" }

// String is the version as Temporal writes it, name.build, or "unversioned".
func (d Deployment) String() string {
	if !d.Versioned() {
		return "unversioned"
	}
	return d.Name + "." + d.BuildID
}

func (d Deployment) options() sdkworker.DeploymentOptions {
	if !d.Versioned() {
		return sdkworker.DeploymentOptions{}
	}
	// No DefaultVersioningBehavior: every workflow type declares its own (RegisterWorkflows),
	// and the SDK refuses to register one that does not.
	return sdkworker.DeploymentOptions{UseVersioning: true,
		Version: sdkworker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID}}
}

// DeploymentFromConfig is the deployment the process's workers poll as: LOCKERNET_DEPLOYMENT_NAME
// and LOCKERNET_BUILD_ID, else this executable's BuildID; unversioned with
// LOCKERNET_WORKER_VERSIONING=false.
func DeploymentFromConfig(cfg config.Config) (Deployment, error) {
	if !cfg.WorkerVersioning {
		return Deployment{}, nil
	}
	id := cfg.BuildID
	if id == "" {
		var err error
		if id, err = BuildID(); err != nil {
			return Deployment{}, err
		}
	}
	return Deployment{Name: cfg.DeploymentName, BuildID: id}, nil
}

// BuildID is this executable's build id: the VCS revision it was built from (the first 12
// hex digits), with "-dirty-" and a hash of the executable when the work tree had changes
// (two builds of different uncommitted code are different versions), or "exe-" and the hash
// alone when the build recorded no VCS information (go build -buildvcs=false, as the
// Dockerfile builds; set LOCKERNET_BUILD_ID there, so that every process of a release
// shares one id).
func BuildID() (string, error) {
	info, _ := debug.ReadBuildInfo()
	return buildIDFrom(info, func() (string, error) {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find own executable: %w", err)
		}
		return HashFiles(self)
	})
}

// buildIDFrom derives the build id from the build information, hashing the executable
// (exeHash) only when the revision alone does not name the code.
func buildIDFrom(info *debug.BuildInfo, exeHash func() (string, error)) (string, error) {
	var revision string
	dirty := false
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if revision != "" && !dirty {
		return short(revision, 12), nil
	}
	h, err := exeHash()
	if err != nil {
		return "", fmt.Errorf("derive build id: %w", err)
	}
	if revision == "" {
		return "exe-" + h, nil
	}
	return short(revision, 12) + "-dirty-" + h, nil
}

// HashFiles is the first 12 hex digits of the SHA-256 of the named files' contents, in
// order: the executable's own hash above, and the dev stack's one id for the apiserver and
// worker binaries it starts together.
func HashFiles(paths ...string) (string, error) {
	if len(paths) == 0 {
		return "", errors.New("hash files: none named")
	}
	h := sha256.New()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", p, err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", p, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// BuildRevision is the VCS revision this executable was built from (12 hex digits) and
// whether its work tree had changes; "" when the build recorded none.
func BuildRevision() (revision string, dirty bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = short(s.Value, 12)
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	return revision, dirty
}

func short(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n]
	}
	return s
}
