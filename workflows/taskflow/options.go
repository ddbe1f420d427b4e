package taskflow

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/activities/taskact"
	"karvi-edda-temporal/api/slot"
	"karvi-edda-temporal/workflows/flowkit"
)

// Every timeout and retry policy of the task workflow lives here, so that the
// failure behaviour can be read in one place. Each call also carries a
// one-line summary of what it does, which the Web UI shows in the history
// instead of the bare activity name.

// The short activities (plan, start, status) have no heartbeat, so their
// start-to-close limit is also how long a task waits after a worker dies
// in one of them: keep it just above what they need.

// prepareOptions: writing plan.yaml is quick and local; a bad dispatch or
// template is final.
func prepareOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrInvalidDispatch},
		},
	})
}

// startOptions: spawning is idempotent (it re-attaches to a recorded run), so
// retrying after a worker crash is safe. A missing conductor binary is final.
func startOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        10,
			NonRetryableErrorTypes: []string{taskact.ErrConductorStart},
		},
	})
}

// tailOptions: a long-poll that heartbeats. A worker killed mid-poll is
// noticed within the heartbeat timeout and the poll resumes from the cursor
// the workflow holds, so nothing is read twice or skipped.
func tailOptions(ctx workflow.Context, wait time.Duration, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: wait + time.Minute,
		HeartbeatTimeout:    5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	})
}

// patchOptions: brief patches go out as a local activity, so a batch costs
// one marker in history instead of a scheduled/started/completed triple and a
// second workflow task. Transient sink failures (karvi down, 5xx) are retried
// for as long as it takes; the workflow waits, keeping the patch order.
// The SDK bounds a local activity's retries by ScheduleToCloseTimeout and
// defaults that to StartToCloseTimeout, which would drop a patch after 15 s
// of karvi being down; flowkit.RetryFor is "as long as it takes" in practice.
func patchOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		Summary:                summary,
		ScheduleToCloseTimeout: flowkit.RetryFor,
		StartToCloseTimeout:    15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        100 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        5 * time.Second,
			NonRetryableErrorTypes: []string{taskact.ErrNoBrief, taskact.ErrSinkRejected},
		},
	})
}

// statusOptions: a task status write is rare and must land, so it is a
// regular activity retried until it succeeds or the sink refuses it for good.
func statusOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{taskact.ErrSinkRejected},
		},
	})
}

// abortOptions: stopping waits for the process group to be gone (TERM, grace,
// KILL), so it heartbeats; it is idempotent and retried until it succeeds.
func abortOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	})
}

// attemptOptions: starting an attempt writes the plan, the brief skeleton
// and the dispatched status, spawns the conductor, then delivers as
// deliverOptions says up to a first checkpoint; every step is idempotent
// and a retry skips what the sink already has. A bad dispatch or a status
// karvi refuses is final.
func attemptOptions(ctx workflow.Context, wait time.Duration, summary string) workflow.Context {
	o := deliveryOptions(wait, startHeartbeat, summary)
	o.RetryPolicy.NonRetryableErrorTypes = []string{activities.ErrInvalidDispatch, taskact.ErrSinkRejected}
	return workflow.WithActivityOptions(ctx, o)
}

// claimOptions: a claim answers at once from any worker with room; a full
// host hands it back (HostFull), retried until a host has room. Its join
// of the worker's account gives up after 10 s, so a claim that takes
// longer sits on a worker that died: the timeout is what a task waits
// before another worker claims it.
func claimOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	})
}

// deliverOptions: the delivering tail heartbeats; a worker killed
// mid-delivery is noticed within the heartbeat timeout and the retry
// resumes from the workflow's checkpoint, skipping what the sink already
// has. A karvi outage holds a call for as long as it lasts (heartbeating),
// so the limit is generous: past it the call is retried, which is safe.
func deliverOptions(ctx workflow.Context, wait, heartbeat time.Duration, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, deliveryOptions(wait, heartbeat, summary))
}

// startHeartbeat is the heartbeat timeout of an attempt's start, and of
// the deliveries of a task before its tail reported its worker's
// (State.TailHeartbeat): a start is short (its first delivery ends at the
// first phase, or after startWait), so its heartbeats cost little.
const startHeartbeat = 5 * time.Second

func deliveryOptions(wait, heartbeat time.Duration, summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: wait + 30*time.Minute,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	}
}

// appendOptions: storing a few lines is quick; a store that stays broken
// for a minute loses them (the task's outcome is already written).
func appendOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		Summary:                summary,
		ScheduleToCloseTimeout: time.Minute,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    100 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
		},
	})
}

// readOptions: a read of a task's event stream waits up to wait for the
// next event, heartbeating, so a worker killed mid-read is noticed within
// the heartbeat timeout and the read retried on another. A store that
// stays broken fails the read after a while: the update answers with the
// error and the client decides. A bad offset is final.
func readOptions(ctx workflow.Context, wait time.Duration, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:                summary,
		ScheduleToCloseTimeout: wait + 2*time.Minute,
		StartToCloseTimeout:    wait + 30*time.Second,
		HeartbeatTimeout:       5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        5 * time.Second,
			NonRetryableErrorTypes: []string{taskact.ErrBadRead},
		},
	})
}

// acquireSlotOptions: the acquire update is answered at once, so a call
// that takes long is a server or worker in trouble: retry until it gets
// through. The limit is short because it is also how long a task waits
// after its worker died mid-call (the call does not heartbeat). The
// update's id makes a retry harmless. A request the pool refuses as
// malformed is final.
func acquireSlotOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		Summary:             summary,
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{slotapi.ErrBadSlotRequest},
		},
	})
}
