// Package temporalclient dials Temporal for the service processes and registers the
// search attributes the workflows set.
package temporalclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/lockernet/lockernet/internal/telemetry"
	"github.com/lockernet/lockernet/workflows/contract"
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
	for _, name := range contract.SearchAttributeNames {
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

// EnsureNamespace registers namespace with the given retention unless it exists, and waits
// until the frontend serves it (a new namespace reaches the frontend's cache within
// seconds). A fresh Temporal cluster has only its system namespace; compose's
// create-namespace step and the cluster dev stack call this.
func EnsureNamespace(ctx context.Context, c client.Client, namespace string, retention time.Duration) error {
	ws := c.WorkflowService()
	_, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var notFound *serviceerror.NamespaceNotFound
	if errors.As(err, &notFound) {
		_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(retention)})
		var exists *serviceerror.NamespaceAlreadyExists
		if errors.As(err, &exists) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("ensure namespace %s: %w", namespace, err)
	}
	// Listing the namespace's search attributes goes through the frontend's namespace cache.
	for {
		_, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for namespace %s: %w", namespace, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
