package slotact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/slots"
)

// ErrBadSlotRequest is slotapi's: the task workflows tell it apart.
const ErrBadSlotRequest = slotapi.ErrBadSlotRequest

// SlotClient is the part of a Temporal client the slot activities need.
type SlotClient = slotapi.Temporal

// Activities reach a slot pool's workflow for a task workflow (which
// cannot send an update itself) and look at the pool's holders for the pool.
type Activities struct {
	Temporal SlotClient
	// BatchWindow is how long the first acquire for an idle pool waits for
	// others to join its update (acquires arriving while an update to the
	// pool is under way join the next one anyway). 0: DefaultBatchWindow;
	// negative: no batching, one acquire update per task.
	BatchWindow time.Duration
	// BatchesInFlight bounds the acquire-many updates under way at once
	// to one pool from this worker. 0: DefaultBatchesInFlight.
	BatchesInFlight int
	// Scale is the time scale a pool this worker starts runs at (its
	// check interval): the worker's -time-scale.
	Scale timescale.Scale

	batch batcher
}

// poolInput starts pool's workflow when an acquire finds none.
func (a *Activities) poolInput(pool string) slotapi.PoolInput {
	in := slotapi.PoolInput{Pool: pool}
	if a.Scale.Scaled() {
		in.TimeScale = float64(a.Scale)
	}
	return in
}

// DefaultBatchWindow is Activities.BatchWindow when unset: short beside
// an update's round trip, long enough for a burst's acquires to meet.
const DefaultBatchWindow = 5 * time.Millisecond

// DefaultBatchesInFlight is Activities.BatchesInFlight when unset: well
// under the server's 10 updates in flight per workflow, leaving room for
// other workers and for limit changes.
const DefaultBatchesInFlight = 4

// AcquireSlotRequest is slotapi's: a task workflow sends it.
type AcquireSlotRequest = slotapi.AcquireSlotRequest

// AcquireSlot asks the pool's workflow for a slot, starting the pool on
// this worker's task queue if it does not run yet, and returns the pool's
// answer, which comes at once: the pool never holds an acquire open until
// a slot frees.
//
// The acquires this worker's tasks make for the same pool at about the
// same time go in one acquire-many update (see batcher), each answered
// from its own answer in the result. Should that update fail, each of its
// acquires asks again alone, by the acquire update whose id is the key's.
// Either way a retry is harmless: the pool answers a repeated key as it
// did the first time (its grant, its place, or "released").
func (a *Activities) AcquireSlot(ctx context.Context, req AcquireSlotRequest) (slots.Answer, error) {
	return a.acquire(ctx, activity.GetInfo(ctx).TaskQueue, req)
}

func (a *Activities) acquire(ctx context.Context, queue string, req AcquireSlotRequest) (slots.Answer, error) {
	if a.Temporal == nil {
		return slots.Answer{}, temporal.NewNonRetryableApplicationError(
			"the worker has no Temporal client for the slot activities", "NoClient", nil)
	}
	if err := slots.ValidPoolName(req.Pool); err != nil {
		return slots.Answer{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadSlotRequest, err)
	}
	k := req.Request.Key
	if err := req.Request.Validate(); err != nil {
		return slots.Answer{}, refusedErr(req.Pool, k, err)
	}
	if a.BatchWindow < 0 {
		return a.acquireOne(ctx, queue, req)
	}
	got, err := a.batch.ask(ctx, a, queue, req)
	switch {
	case ctx.Err() != nil:
		return slots.Answer{}, fmt.Errorf("acquire a slot in pool %s for %s: %w", req.Pool, k, ctx.Err())
	case err != nil:
		// The batch's update failed (a pool on a worker that does not know
		// acquire-many, the server refusing it): ask alone.
		logFor(ctx).Warn("acquire batch failed; asking alone", "pool", req.Pool, "key", k.String(), "error", err)
		return a.acquireOne(ctx, queue, req)
	case got.Error != "":
		return slots.Answer{}, refusedErr(req.Pool, k, errors.New(got.Error))
	}
	return got.Answer, nil
}

// acquireOne sends one task's acquire update, whose id is the key's: the
// server answers a repeated id from its first outcome.
func (a *Activities) acquireOne(ctx context.Context, queue string, req AcquireSlotRequest) (slots.Answer, error) {
	k := req.Request.Key
	ans, err := slotapi.Pools{Client: a.Temporal, TaskQueue: queue}.Acquire(ctx, a.poolInput(req.Pool), req.Request)
	if err != nil {
		var refused *temporal.ApplicationError
		if errors.As(err, &refused) {
			return slots.Answer{}, refusedErr(req.Pool, k, err)
		}
		return slots.Answer{}, fmt.Errorf("acquire a slot in pool %s for %s: %w", req.Pool, k, err)
	}
	return ans, nil
}

// refusedErr: the pool refused a request as malformed; retrying cannot help.
func refusedErr(pool string, k slots.Key, err error) error {
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("pool %s refused the request for %s: %v", pool, k, err), ErrBadSlotRequest, err)
}

// logFor is the activity's logger, or the default one outside an activity
// (the batcher's tests call acquire directly).
func logFor(ctx context.Context) log.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return log.NewStructuredLogger(slog.New(slog.DiscardHandler))
}

// CheckHoldersRequest lists the holders to look at.
type CheckHoldersRequest struct {
	Pool    string         `json:"pool"`
	Holders []slots.Holder `json:"holders"`
}

// CheckHoldersResult sorts the holders by what their workflows are doing.
type CheckHoldersResult struct {
	// Running: the holder's workflow runs (its lease is renewed).
	Running []slots.Key `json:"running,omitempty"`
	// Closed: the holder's workflow ended, or another workflow took its id;
	// its slot is free.
	Closed []ClosedHolder `json:"closed,omitempty"`
	// Unknown counts holders whose workflow could not be described.
	Unknown int `json:"unknown,omitempty"`
}

// ClosedHolder is a holder whose workflow no longer runs, and why.
type ClosedHolder struct {
	Key slots.Key `json:"key"`
	Why string    `json:"why"`
}

// CheckHolders describes each holder's workflow. A holder whose workflow
// closed (completed, failed, terminated, timed out) without giving its slot
// back must not keep it; one whose workflow id now belongs to another
// workflow (a later start for the same task) has closed too.
func (a *Activities) CheckHolders(ctx context.Context, req CheckHoldersRequest) (CheckHoldersResult, error) {
	if a.Temporal == nil {
		return CheckHoldersResult{}, temporal.NewNonRetryableApplicationError(
			"the worker has no Temporal client for the slot activities", "NoClient", nil)
	}
	var res CheckHoldersResult
	for _, h := range req.Holders {
		activity.RecordHeartbeat(ctx)
		if h.Owner.WorkflowID == "" {
			res.Unknown++
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		d, err := a.Temporal.DescribeWorkflowExecution(dctx, h.Owner.WorkflowID, "")
		cancel()
		if ctx.Err() != nil {
			return CheckHoldersResult{}, ctx.Err()
		}
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			res.Closed = append(res.Closed, ClosedHolder{Key: h.Key, Why: "workflow " + h.Owner.WorkflowID + " not found"})
		case err != nil:
			activity.GetLogger(ctx).Warn("holder not described", "pool", req.Pool, "holder", h.Key.String(), "error", err)
			res.Unknown++
		default:
			if why := closedWhy(d, h.Owner); why != "" {
				res.Closed = append(res.Closed, ClosedHolder{Key: h.Key, Why: why})
			} else {
				res.Running = append(res.Running, h.Key)
			}
		}
	}
	return res, nil
}

// closedWhy says why a described workflow is not the holder's running
// workflow, "" when it is.
func closedWhy(d *workflowservice.DescribeWorkflowExecutionResponse, o slots.Owner) string {
	info := d.GetWorkflowExecutionInfo()
	if first := info.GetFirstRunId(); o.FirstRunID != "" && first != "" && first != o.FirstRunID {
		return fmt.Sprintf("workflow %s is another run chain now (first run %s, the holder's %s)", o.WorkflowID, first, o.FirstRunID)
	}
	if st := info.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Sprintf("workflow %s %s without releasing its slot", o.WorkflowID, closedWord(st))
	}
	return ""
}

func closedWord(st enumspb.WorkflowExecutionStatus) string {
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "was cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "was terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued as new"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	}
	return "closed (" + st.String() + ")"
}
