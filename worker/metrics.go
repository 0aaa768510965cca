package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/lockernet/lockernet/internal/gatewayreq"
	"github.com/lockernet/lockernet/internal/temporalclient"
	"github.com/lockernet/lockernet/workflows/contract"
)

// WorkflowOutcomeMetric counts finished workflows by their business outcome (a reservation
// expired, consumed or cancelled; a token used, revoked or expired; an access code expired,
// removed or used; a gateway request's terminal state). It is exported as
// lockernet_workflow_outcomes_total{workflow_type, outcome, namespace, task_queue}.
const WorkflowOutcomeMetric = "lockernet_workflow_outcomes"

// Metrics instruments a Temporal client, and the workers made from it, with the SDK's
// metrics (temporal_workflow_completed_total, temporal_request_total, task latencies, poller
// and slot gauges...) and the workflow outcome counter, exported into a Prometheus registry
// through OpenTelemetry. Pass ClientOptions to the client's dial.
type Metrics struct {
	handler  client.MetricsHandler
	provider *sdkmetric.MeterProvider
}

// latencyBuckets (seconds) suit the SDK's timers, which run from a millisecond (a workflow
// task) to minutes (a durable timer's end-to-end latency).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// NewMetrics registers the SDK metrics' exporter on reg.
func NewMetrics(reg prometheus.Registerer, logger *slog.Logger) (*Metrics, error) {
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("create temporal metrics exporter: %w", err)
	}
	seconds := sdkmetric.NewView(sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: latencyBuckets}})
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithView(seconds))
	handler := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter: provider.Meter("temporal-sdk-go"),
		// Counters as Prometheus counters (name_total), not gauges.
		UseMonotonicCounters: true,
		// The SDK's default panics; a metric must never stop a worker.
		OnError: func(err error) { logger.Warn("temporal metric", "err", err) },
	})
	return &Metrics{handler: handler, provider: provider}, nil
}

// ClientOptions are the client options that instrument it: the metrics handler and the
// workflow outcome interceptor (a client's interceptors apply to its workers too).
func (m *Metrics) ClientOptions() client.Options {
	return client.Options{MetricsHandler: m.handler, Interceptors: []interceptor.ClientInterceptor{&outcomeInterceptor{}}}
}

// Shutdown stops the meter provider.
func (m *Metrics) Shutdown(ctx context.Context) error {
	return m.provider.Shutdown(ctx)
}

// DialWithMetrics connects to Temporal (temporalclient.DialWith) with the SDK's metrics and
// the outcomes of the workflows this process's workers finish on reg (NewMetrics), as the
// apiserver and the worker both do. closeAll closes the client, then flushes the metrics.
func DialWithMetrics(ctx context.Context, hostPort, namespace string, reg prometheus.Registerer, logger *slog.Logger) (c client.Client, closeAll func(), err error) {
	m, err := NewMetrics(reg, logger)
	if err != nil {
		return nil, nil, err
	}
	flush := func() { _ = m.Shutdown(context.WithoutCancel(ctx)) }
	c, err = temporalclient.DialWith(ctx, hostPort, namespace, logger, m.ClientOptions())
	if err != nil {
		flush()
		return nil, nil, err
	}
	return c, func() { c.Close(); flush() }, nil
}

// outcomeInterceptor counts each finished workflow by outcome through the workflow's own
// metrics handler, which records nothing while the workflow is replaying, so a replay (a
// query on a closed workflow, a worker taking over) never counts a run twice.
type outcomeInterceptor struct {
	interceptor.InterceptorBase
}

func (*outcomeInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &outcomeInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type outcomeInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (o *outcomeInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := o.Next.ExecuteWorkflow(ctx, in)
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": workflowOutcome(res, err)}).
		Counter(WorkflowOutcomeMetric).Inc(1)
	return res, err
}

// workflowOutcome names how a workflow ended: its result's outcome, or the kind of error.
func workflowOutcome(res any, err error) string {
	var canceled *temporal.CanceledError
	switch {
	case workflow.IsContinueAsNewError(err):
		return "continued_as_new"
	case errors.As(err, &canceled), errors.Is(err, workflow.ErrCanceled):
		return "canceled"
	case err != nil:
		return "failed"
	}
	switch r := res.(type) {
	case contract.ReservationState:
		return r.Outcome
	case contract.LockerTokenState:
		return r.Outcome
	case contract.AccessCodeState:
		return r.Outcome
	case gatewayreq.Result:
		return r.Outcome.Status
	case contract.WebhookDeliveryResult:
		return r.Outcome
	}
	return "completed"
}
