package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadCase sets the environment variables env and loads the configuration. With
// wantErr set, loading must fail with an error naming it, and ok is false; without,
// loading must succeed.
func loadCase(t *testing.T, env map[string]string, wantErr string) (c Config, ok bool) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	c, err := Load()
	if wantErr != "" {
		require.Error(t, err)
		assert.Contains(t, err.Error(), wantErr)
		return c, false
	}
	require.NoError(t, err)
	return c, true
}

func TestEnvironmentSettings(t *testing.T) {
	tests := []struct {
		name, environment, prefix string
		wantEnvironment           string
		wantPrefix                string
		wantErr                   string
	}{
		{name: "defaults", wantEnvironment: "development", wantPrefix: "01"},
		{name: "sandbox", environment: "sandbox", prefix: "5A", wantEnvironment: "sandbox", wantPrefix: "5a"},
		{name: "production", environment: "production", prefix: "01", wantEnvironment: "production", wantPrefix: "01"},
		{name: "environment with spaces", environment: "my sandbox", wantErr: "LOCKERNET_ENVIRONMENT"},
		{name: "environment upper case", environment: "Production", wantErr: "LOCKERNET_ENVIRONMENT"},
		{name: "prefix too long", prefix: "012", wantErr: "LOCKERNET_TOWER_ID_PREFIX"},
		{name: "prefix not hex", prefix: "0g", wantErr: "LOCKERNET_TOWER_ID_PREFIX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := loadCase(t, map[string]string{
				"LOCKERNET_ENVIRONMENT":     tt.environment,
				"LOCKERNET_TOWER_ID_PREFIX": tt.prefix,
			}, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, tt.wantEnvironment, c.Environment)
			assert.Equal(t, tt.wantPrefix, c.TowerIDPrefix)
		})
	}
}

func TestPoolSettings(t *testing.T) {
	tests := []struct {
		name, maxConns, acquire string
		wantMaxConns            int32
		wantAcquire             time.Duration
		wantErr                 string
	}{
		{name: "defaults", wantMaxConns: 20, wantAcquire: 2 * time.Second},
		{name: "set", maxConns: "8", acquire: "750ms", wantMaxConns: 8, wantAcquire: 750 * time.Millisecond},
		{name: "acquire without unit", acquire: "2", wantErr: "LOCKERNET_DB_ACQUIRE_TIMEOUT"},
		{name: "acquire zero", acquire: "0s", wantErr: "LOCKERNET_DB_ACQUIRE_TIMEOUT"},
		{name: "acquire negative", acquire: "-1s", wantErr: "LOCKERNET_DB_ACQUIRE_TIMEOUT"},
		{name: "max conns zero", maxConns: "0", wantErr: "LOCKERNET_DB_MAX_CONNS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := loadCase(t, map[string]string{
				"LOCKERNET_DB_MAX_CONNS":       tt.maxConns,
				"LOCKERNET_DB_ACQUIRE_TIMEOUT": tt.acquire,
			}, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, tt.wantMaxConns, c.DBMaxConns)
			assert.Equal(t, tt.wantAcquire, c.DBAcquireTimeout)
		})
	}
}

func TestWebhookScheduleSettings(t *testing.T) {
	tests := []struct {
		name, schedule string
		want           []time.Duration
		wantErr        string
	}{
		{name: "unset: the deliveries' default", want: nil},
		{name: "set", schedule: "1s, 2m,3h", want: []time.Duration{time.Second, 2 * time.Minute, 3 * time.Hour}},
		{name: "not a duration", schedule: "5s,soon", wantErr: "LOCKERNET_WEBHOOK_RETRY_SCHEDULE"},
		{name: "wait over 48h", schedule: "49h", wantErr: "LOCKERNET_WEBHOOK_RETRY_SCHEDULE"},
		{name: "zero wait", schedule: "0s", wantErr: "LOCKERNET_WEBHOOK_RETRY_SCHEDULE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := loadCase(t, map[string]string{"LOCKERNET_WEBHOOK_RETRY_SCHEDULE": tt.schedule}, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, tt.want, c.WebhookSchedule)
		})
	}
}

func TestTrustedProxies(t *testing.T) {
	tests := []struct {
		name, value string
		want        []string
		wantErr     string
	}{
		{name: "default: loopback only", value: "", want: []string{"127.0.0.0/8", "::1/128"}},
		{name: "addresses and prefixes", value: "10.0.0.7, 172.16.0.0/12,fd00::/8", want: []string{"10.0.0.7/32", "172.16.0.0/12", "fd00::/8"}},
		{name: "a prefix with host bits", value: "192.168.1.9/24", want: []string{"192.168.1.0/24"}},
		{name: "none", value: "none", want: nil},
		{name: "a name", value: "proxy.internal", wantErr: "LOCKERNET_TRUSTED_PROXIES"},
		{name: "a bad prefix", value: "10.0.0.0/33", wantErr: "LOCKERNET_TRUSTED_PROXIES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := loadCase(t, map[string]string{"LOCKERNET_TRUSTED_PROXIES": tt.value}, tt.wantErr)
			if !ok {
				return
			}
			got, err := ParseTrustedProxies(c.TrustedProxies)
			require.NoError(t, err)
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			assert.Equal(t, tt.want, s)
		})
	}
}

func TestInProcessWorkerSettings(t *testing.T) {
	tests := []struct {
		name, gatewayWorker, worker, gatewayQueue string
		wantGatewayWorker, wantWorker             bool
		wantErr                                   string
	}{
		{name: "defaults"},
		{name: "both", gatewayWorker: "true", worker: "true", wantGatewayWorker: true, wantWorker: true},
		{name: "main queue only", worker: "true", wantWorker: true},
		// One queue for everything: the main queue's worker runs the gateway requests too.
		{name: "main queue only, one queue", worker: "true", gatewayQueue: "lockernet", wantWorker: true},
		{name: "worker not a bool", worker: "yes please", wantErr: "LOCKERNET_API_WORKER"},
		{name: "gateway worker not a bool", gatewayWorker: "2", wantErr: "LOCKERNET_API_GATEWAY_WORKER"},
		{name: "gateway worker on the main queue", gatewayWorker: "true", gatewayQueue: "lockernet", wantErr: "LOCKERNET_API_GATEWAY_WORKER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := loadCase(t, map[string]string{
				"LOCKERNET_API_GATEWAY_WORKER": tt.gatewayWorker,
				"LOCKERNET_API_WORKER":         tt.worker,
				"LOCKERNET_GATEWAY_TASK_QUEUE": tt.gatewayQueue,
				"LOCKERNET_TASK_QUEUE":         "lockernet",
			}, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, tt.wantGatewayWorker, c.APIGatewayWorker)
			assert.Equal(t, tt.wantWorker, c.APIWorker)
		})
	}
}

func TestWorkerVersioningSettings(t *testing.T) {
	tests := []struct {
		name, versioning, deployment, build string
		wantVersioning                      bool
		wantDeployment, wantBuild           string
		wantErr                             string
	}{
		{name: "defaults", wantDeployment: "lockernet"},
		{name: "on, build from the binary", versioning: "true", wantVersioning: true, wantDeployment: "lockernet"},
		{name: "named", versioning: "true", deployment: "lockernet-eu_1", build: "1a2b3c4d5e6f-dirty-0a1b2c3d4e5f",
			wantVersioning: true, wantDeployment: "lockernet-eu_1", wantBuild: "1a2b3c4d5e6f-dirty-0a1b2c3d4e5f"},
		{name: "release tag", versioning: "true", build: "v1.4.2", wantVersioning: true, wantDeployment: "lockernet", wantBuild: "v1.4.2"},
		{name: "versioning not a bool", versioning: "on", wantErr: "LOCKERNET_WORKER_VERSIONING"},
		{name: "deployment with a dot", deployment: "lockernet.eu", wantErr: "LOCKERNET_DEPLOYMENT_NAME"},
		{name: "deployment with a colon", deployment: "lockernet:eu", wantErr: "LOCKERNET_DEPLOYMENT_NAME"},
		{name: "deployment reserved prefix", deployment: "__lockernet", wantErr: "LOCKERNET_DEPLOYMENT_NAME"},
		{name: "build with a space", build: "v1 final", wantErr: "LOCKERNET_BUILD_ID"},
		{name: "build reserved prefix", build: "__unversioned__", wantErr: "LOCKERNET_BUILD_ID"},
		{name: "build too long", build: strings.Repeat("a", 101), wantErr: "LOCKERNET_BUILD_ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := loadCase(t, map[string]string{
				"LOCKERNET_WORKER_VERSIONING": tt.versioning,
				"LOCKERNET_DEPLOYMENT_NAME":   tt.deployment,
				"LOCKERNET_BUILD_ID":          tt.build,
			}, tt.wantErr)
			if !ok {
				return
			}
			assert.Equal(t, tt.wantVersioning, c.WorkerVersioning)
			assert.Equal(t, tt.wantDeployment, c.DeploymentName)
			assert.Equal(t, tt.wantBuild, c.BuildID)
		})
	}
}
