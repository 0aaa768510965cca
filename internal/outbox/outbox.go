// Package outbox starts the workflows that state changes recorded in the workflow_outbox
// table, right after their transaction commits, and sweeps up any whose first dispatch was
// lost (a crash, Temporal briefly unreachable). Dispatch is idempotent: workflow IDs are
// fixed and a repeated start or signal finds the existing run.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/workflows/contract"
)

// Store is the outbox persistence the dispatcher needs.
type Store interface {
	ClaimDueOutbox(ctx context.Context, limit int, lease time.Duration) ([]store.OutboxItem, error)
	DeleteOutbox(ctx context.Context, ids ...int64) error
	RetryOutboxLater(ctx context.Context, id int64, after time.Duration, cause string) error
}

// Dispatcher starts outbox workflows on a Temporal task queue.
type Dispatcher struct {
	store     Store
	temporal  client.Client
	taskQueue string
	logger    *slog.Logger

	queue *fairQueue
	wg    sync.WaitGroup
	// done takes the ids of dispatched items for Run's deleter, which removes whatever has
	// gathered in one statement: ids that arrive while one DELETE commits go in the next,
	// so a burst of starts costs a few commits rather than one each. deleting says the
	// deleter runs; without it (a dispatcher that only sweeps) handle deletes at once.
	done     chan int64
	deleting atomic.Bool
	// Lease is how long a sweep's claim lasts; Workers how many dispatches run at once.
	Lease   time.Duration
	Workers int
}

// HandoffGrace is how long the sweep leaves an item handed off at its commit to that
// hand-off (store.HandOffEvents) before it starts the item itself.
const HandoffGrace = 5 * time.Second

// New returns a dispatcher; call Run to start it.
func New(st Store, c client.Client, taskQueue string, logger *slog.Logger) *Dispatcher {
	return &Dispatcher{store: st, temporal: c, taskQueue: taskQueue, logger: logger,
		queue: newFairQueue(4096), done: make(chan int64, 4096), Lease: 30 * time.Second, Workers: 16}
}

// Dispatch hands committed items to the dispatch workers without waiting, fairly between
// organizations (round-robin). If the queue is full the items stay in the table and the
// sweep starts them after their grace period.
func (d *Dispatcher) Dispatch(items ...store.OutboxItem) {
	for _, it := range items {
		d.queue.push(it)
	}
}

// Run runs the dispatch workers until ctx is done, then waits for in-flight dispatches.
// The sweep (Sweep) is a background loop of its own (internal/maintenance).
func (d *Dispatcher) Run(ctx context.Context) error {
	d.deleting.Store(true)
	d.wg.Go(func() { d.deleteDone(ctx) })
	for range d.Workers {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for {
				it, ok := d.queue.pop(ctx)
				if !ok {
					return
				}
				d.handle(ctx, it)
			}
		}()
	}
	<-ctx.Done()
	d.wg.Wait()
	return nil
}

// Sweep dispatches every due item: those whose first dispatch was lost, or is older than
// its grace, and those rescheduled after a failure.
func (d *Dispatcher) Sweep(ctx context.Context) error {
	for {
		items, err := d.store.ClaimDueOutbox(ctx, 100, d.Lease)
		if err != nil {
			return fmt.Errorf("claim outbox: %w", err)
		}
		if len(items) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, d.Workers)
		for _, it := range items {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				d.handle(ctx, it)
			}()
		}
		wg.Wait()
		if len(items) < 100 {
			return nil
		}
	}
}

func (d *Dispatcher) handle(ctx context.Context, it store.OutboxItem) {
	err := d.start(ctx, it)
	if err == nil {
		if d.deleting.Load() {
			select {
			case d.done <- it.ID:
				return
			default: // the deleter is behind by a whole channel: delete this one here
			}
		}
		d.delete(ctx, it.ID)
		return
	}
	if ctx.Err() != nil {
		return
	}
	backoff := min(time.Duration(1<<min(it.Attempts, 6))*time.Second, time.Minute)
	d.logger.WarnContext(ctx, "dispatch workflow", "workflow_id", it.WorkflowID, "attempts", it.Attempts, "err", err)
	if err := d.store.RetryOutboxLater(ctx, it.ID, backoff, err.Error()); err != nil {
		d.logger.WarnContext(ctx, "reschedule outbox item", "id", it.ID, "err", err)
	}
}

// deleteDone removes dispatched items until ctx is done: it waits for one id, takes every
// other id already waiting (up to maxDeleteBatch), and deletes them in one statement. Its
// deletes outlive ctx by up to deleteTimeout, so the items started before a shutdown lose
// no delete to it: when ctx ends it hands deleting back to handle and deletes what is still
// waiting. An id whose delete fails keeps its row: the sweep starts that item again after
// its grace, which finds the workflow already started (dispatch is idempotent).
func (d *Dispatcher) deleteDone(ctx context.Context) {
	del := func(ids []int64) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		d.delete(dctx, ids...)
	}
	for {
		select {
		case <-ctx.Done():
			d.deleting.Store(false)
			for ids := d.waiting(nil); len(ids) > 0; ids = d.waiting(nil) {
				del(ids)
			}
			return
		case id := <-d.done:
			del(d.waiting([]int64{id}))
		}
	}
}

// waiting appends the ids waiting for the deleter to ids, up to maxDeleteBatch in all.
func (d *Dispatcher) waiting(ids []int64) []int64 {
	for len(ids) < maxDeleteBatch {
		select {
		case id := <-d.done:
			ids = append(ids, id)
		default:
			return ids
		}
	}
	return ids
}

// deleteTimeout bounds one of the deleter's statements.
const deleteTimeout = 5 * time.Second

// maxDeleteBatch bounds one DELETE's ids.
const maxDeleteBatch = 500

func (d *Dispatcher) delete(ctx context.Context, ids ...int64) {
	if err := d.store.DeleteOutbox(ctx, ids...); err != nil && ctx.Err() == nil {
		d.logger.WarnContext(ctx, "delete dispatched outbox items", "ids", len(ids), "first", ids[0], "err", err)
	}
}

func (d *Dispatcher) start(ctx context.Context, it store.OutboxItem) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := client.StartWorkflowOptions{
		ID:                    it.WorkflowID,
		TaskQueue:             d.taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: contract.KeywordAttributes(it.SearchAttributes),
	}
	if it.SignalName == "" {
		opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
		// Where this process also runs a worker for the task queue on the same client, the
		// first workflow task comes back with the start and runs here, without a round
		// through the task queue; elsewhere the flag is ignored. A start of a workflow that
		// already finished returns that run (the SDK's default), so a start repeated by the
		// sweep after the hand-off's is done, not retried.
		opts.EnableEagerStart = true
		_, err := d.temporal.ExecuteWorkflow(ctx, opts, it.WorkflowType, it.Input)
		return err
	}
	_, err := d.temporal.SignalWithStartWorkflow(ctx, it.WorkflowID, it.SignalName, it.SignalArg, opts, it.WorkflowType, it.Input)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		// The workflow already finished: there is nothing left to tell it.
		return nil
	}
	return err
}
