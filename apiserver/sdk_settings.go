package apiserver

import (
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/towerproto"
)

// The mobile SDK API (/sdk/v1, DESIGN §4.8): what Harbor's Android and iOS SDKs call. Its
// operations live in the sdk_*.go files and share the tag below.

const sdkTag = "Mobile SDK"

// SDKSettings configure the mobile SDK API; the zero value takes the defaults of
// internal/config.
type SDKSettings struct {
	// DefaultClaims are the session claims a client without its own list may ask for.
	DefaultClaims []string
	// BLEServices are what GET /sdk/v1/services/ lists.
	BLEServices []config.BLEService
	// CommandTTL is how long a signed command batch stays valid at a tower.
	CommandTTL time.Duration
	// Environment names the deployment; anything but "production" marks towers as for test.
	Environment string
}

// SDKSettingsFromConfig takes the mobile SDK API's settings from the service's.
func SDKSettingsFromConfig(cfg config.Config) SDKSettings {
	return SDKSettings{DefaultClaims: cfg.SDKDefaultClaims, BLEServices: cfg.SDKBLEServices,
		CommandTTL: cfg.SDKCommandTTL, Environment: cfg.Environment}
}

func (c SDKSettings) withDefaults() SDKSettings {
	if c.DefaultClaims == nil {
		c.DefaultClaims, _ = towerproto.ParseClaims(config.DefaultSDKClaims)
	}
	if len(c.BLEServices) == 0 {
		c.BLEServices = []config.BLEService{{Name: "tower", UUID: config.DefaultBLEServiceUUID}}
	}
	if c.CommandTTL <= 0 {
		c.CommandTTL = 24 * time.Hour
	}
	if c.Environment == "" {
		c.Environment = "development"
	}
	return c
}

type sdkMetrics struct {
	sessions *prometheus.CounterVec
	commands prometheus.Counter
	resets   prometheus.Counter
}

func newSDKMetrics(reg *prometheus.Registry) *sdkMetrics {
	m := &sdkMetrics{
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockernet_sdk_sessions_total",
			Help: "Tower sessions sealed for the mobile SDK, by claim.",
		}, []string{"claim"}),
		commands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockernet_sdk_commands_served_total",
			Help: "Commands served to the mobile SDK for towers to apply (a command is served until its tower reports it applied).",
		}),
		resets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockernet_sdk_event_resets_total",
			Help: "Reports that a tower's event log was reset (repeats of one report within a minute not counted).",
		}),
	}
	reg.MustRegister(m.sessions, m.commands, m.resets)
	return m
}

// sdkText checks a free-text field before it is stored: Postgres text cannot hold NUL.
func sdkText(field, v string) error {
	if strings.ContainsRune(v, 0) {
		return invalidField(field+" must not contain NUL characters", "body."+field, nil, "contains a NUL character")
	}
	return nil
}

func (s *Server) registerSDK(api huma.API) {
	s.sdk = s.deps.SDK.withDefaults()
	s.sdkMetrics = newSDKMetrics(s.deps.Registry)
	s.registerSDKSessions(api)
	s.registerSDKCommands(api)
	s.registerSDKServices(api)
}
