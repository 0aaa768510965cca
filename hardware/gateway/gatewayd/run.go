package gatewayd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/lockernet/lockernet/hardware/gateway"
	"github.com/lockernet/lockernet/hardware/lockctl"
	"github.com/lockernet/lockernet/hardware/lockctl/kerong"
	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/telemetry"
)

// Run starts the gateway and serves its local API until ctx ends; it logs to logOut. ready,
// if not nil, is called with the local API's address once it listens. An error a
// *UsageError wraps is one of the settings.
func Run(ctx context.Context, c Config, logOut io.Writer, ready func(addr string)) error {
	logger, err := config.NewLogger(c.LogFormat, c.LogLevel, logOut, telemetry.LogHandler)
	if err != nil {
		return err
	}
	// OTEL_* (package telemetry): the local API continues the cloud's traces.
	stopTracing, err := telemetry.Setup(ctx, "gateway", logger)
	if err != nil {
		return &UsageError{Err: err}
	}
	defer func() {
		if err := stopTracing(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("flush traces", "err", err)
		}
	}()
	secret, err := checkCredentials(c)
	if err != nil {
		return err
	}
	layout, id, dbPath, err := site(c)
	if err != nil {
		return err
	}

	buses := kerong.NewBuses()
	defer buses.Close()
	defer c.sim.close()
	layout, ctls, err := controllers(&c, layout, buses)
	if err != nil {
		return &UsageError{Err: err}
	}
	logDrivers(logger, ctls)
	srv, err := gateway.New(ctx, gateway.Config{
		GatewayID:     id,
		Secret:        secret,
		DBPath:        dbPath,
		Layout:        layout,
		Open:          c.openPolicy(),
		SensorTimeout: c.SensorTimeout,
		StopGrace:     c.StopGrace,
		Watch:         c.Watch,
		Version:       c.Version,
		Logger:        logger,
	}, ctls...)
	if err != nil {
		return err
	}
	// Serve closes the gateway itself once the requests in flight are done; this is for the
	// ways out before it.
	defer func() {
		if err := srv.Close(); err != nil {
			logger.Error("close gateway", "err", err)
		}
	}()

	ln, handler, simDone, err := listen(ctx, &c, srv.Handler(), logger)
	if err != nil {
		return err
	}
	logger.Info("gateway listening", "gatewayId", id, "addr", ln.Addr().String(), "tls", c.TLSCert != "", "db", dbPath,
		"layout", c.Layout, "version", c.Version, "stopGraceMs", srv.StopGrace().Milliseconds())
	if ready != nil {
		ready(ln.Addr().String())
	}
	// The stop's order: no new requests, those in flight finish and record their results,
	// then the database closes (all in Serve); the simulator and the buses go after.
	err = srv.Serve(ctx, ln, handler)
	c.sim.close()
	if simDone != nil {
		<-simDone
	}
	logger.Info("gateway stopped", "gatewayId", id)
	return err
}

// checkCredentials checks that -tls-cert and -tls-key come together and returns the local
// API's bearer secret, refusing a weak one.
func checkCredentials(c Config) (string, error) {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return "", &UsageError{Err: errors.New("give -tls-cert and -tls-key together")}
	}
	secret, err := readSecret(c)
	if err != nil {
		return "", err
	}
	if err := checkSecret(secret); err != nil {
		return "", &UsageError{Err: err}
	}
	return secret, nil
}

// site is the gateway's layout, its id (-id, or the layout's) and its database file (-db, or
// gateway-<id>.db in the data directory, which it creates).
func site(c Config) (layout gateway.Layout, id, dbPath string, err error) {
	layout, err = gateway.LoadLayout(c.Layout)
	if err != nil {
		return layout, "", "", err
	}
	id = c.ID
	if id == "" {
		id = layout.GatewayID
	}
	if id == "" {
		return layout, "", "", errors.New("a gateway id is required (-id): the layout names none")
	}
	dbPath = c.DB
	if dbPath == "" {
		dbPath = filepath.Join(c.DataDir, "gateway-"+id+".db")
	}
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o755); err != nil {
		return layout, "", "", fmt.Errorf("create database directory: %w", err)
	}
	return layout, id, dbPath, nil
}

// logDrivers logs the driver of every Kerong controller: its transport, port and boards.
func logDrivers(logger *slog.Logger, ctls []lockctl.Controller) {
	for _, ctl := range ctls {
		if k, ok := ctl.(*kerong.Controller); ok {
			logger.Info("lock controller", "controllerId", k.ID(), "driver", k.Describe())
		}
	}
}

// listen opens the local API's listener on -addr, with the simulator's faults in front of it
// where the build has them (simDone closes when the simulator's control API has stopped),
// and TLS with -tls-cert.
func listen(ctx context.Context, c *Config, h http.Handler, logger *slog.Logger) (ln net.Listener, handler http.Handler, simDone <-chan struct{}, err error) {
	ln, err = net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listen on %s for the local API: %w", c.Addr, err)
	}
	ln, handler, simDone, err = c.sim.start(ctx, ln, h, logger)
	if err != nil {
		_ = ln.Close()
		return nil, nil, nil, err
	}
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			_ = ln.Close()
			return nil, nil, nil, &UsageError{Err: fmt.Errorf("load -tls-cert/-tls-key: %w", err)}
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	return ln, handler, simDone, nil
}
