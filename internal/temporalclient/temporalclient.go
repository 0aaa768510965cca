// Package temporalclient dials Temporal for the service processes and registers the
// search attributes the workflows set.
package temporalclient

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/lockernet/lockernet/internal/telemetry"
	"github.com/lockernet/lockernet/workflows"
)

// Dial connects to the Temporal frontend, retrying until ctx is done so a process can start
// before Temporal is up.
func Dial(ctx context.Context, hostPort, namespace string, logger *slog.Logger) (client.Client, error) {
	return DialWith(ctx, hostPort, namespace, logger, client.Options{})
}

// DialWith is Dial with more client options (a metrics handler, interceptors); it sets
// their HostPort, Namespace and Logger.
func DialWith(ctx context.Context, hostPort, namespace string, logger *slog.Logger, opts client.Options) (client.Client, error) {
	opts.HostPort = hostPort
	opts.Namespace = namespace
	opts.Logger = sdklog.NewStructuredLogger(logger.With("component", "temporal"))
	tracing, err := telemetry.TemporalInterceptors()
	if err != nil {
		return nil, fmt.Errorf("trace temporal client: %w", err)
	}
	opts.Interceptors = append(tracing, opts.Interceptors...)
	for {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		logger.WarnContext(ctx, "temporal not reachable yet", "address", hostPort, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial temporal at %s: %w", hostPort, err)
		case <-time.After(time.Second):
		}
	}
}

// EnsureSearchAttributes registers the workflows' custom search attributes on the namespace
// if they are missing. It needs operator rights; the dev stack, the tests and the
// migration command call it.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	ops := c.OperatorService()
	have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for _, name := range workflows.SearchAttributeNames {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	if err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}
