package apiserver

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/sdk/client"
)

type healthBody struct {
	Status string            `json:"status" enum:"ok,unavailable"`
	Checks map[string]string `json:"checks"`
}

type healthOutput struct {
	Status int
	Body   healthBody
}

func (s *Server) registerHealth(api huma.API) {
	huma.Register(api, op(huma.Operation{
		OperationID: "get-healthz", Method: http.MethodGet, Path: "/healthz", Tags: []string{"Health"},
		Summary: "Process liveness",
	}), func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		return &healthOutput{Status: http.StatusOK, Body: healthBody{Status: "ok", Checks: map[string]string{}}}, nil
	})
	huma.Register(api, op(huma.Operation{
		OperationID: "get-readyz", Method: http.MethodGet, Path: "/readyz", Tags: []string{"Health"},
		Summary: "Readiness: Postgres and Temporal reachable",
	}), func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		return s.readiness(ctx), nil
	})
}

func (s *Server) readiness(ctx context.Context) *healthOutput {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out := &healthOutput{Status: http.StatusOK, Body: healthBody{Status: "ok", Checks: map[string]string{}}}
	// Status only: the error names hosts and databases, so it goes to the log (DESIGN §8).
	fail := func(name string, err error) {
		out.Status, out.Body.Status = http.StatusServiceUnavailable, "unavailable"
		out.Body.Checks[name] = "unavailable"
		s.logger.WarnContext(ctx, "not ready", "check", name, "err", err)
	}
	if err := s.deps.Store.Ping(ctx); err != nil {
		fail("postgres", err)
	} else {
		out.Body.Checks["postgres"] = "ok"
	}
	if _, err := s.deps.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		fail("temporal", err)
	} else {
		out.Body.Checks["temporal"] = "ok"
	}
	return out
}
