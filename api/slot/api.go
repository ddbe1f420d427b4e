package slotapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/slots"
)

// Names a client uses to talk to a pool's workflow. They are part of the
// public interface (the temporal CLI uses them too), so they never change.
const (
	PoolWorkflowName = "SlotPoolWorkflow"

	// UpdateAcquire takes a slots.Request and answers a slots.Answer at
	// once: granted, queued (with the place in line) or refused. A queued
	// request hears of its grant or refusal later, by SignalSlot.
	UpdateAcquire = "acquire"
	// UpdateAcquireMany takes an AcquireMany, the acquires of many tasks in
	// one update, and answers an AcquireManyResult: each request's answer,
	// in order, as UpdateAcquire would have answered it alone. A worker
	// sends its tasks' acquires this way, so a burst of them costs the
	// pool a few updates instead of one each (Temporal admits only 10
	// updates in flight per workflow).
	UpdateAcquireMany = "acquire-many"
	// UpdateSet takes a SetRequest and answers the pool's View; limits it
	// cannot work with are refused with the reason.
	UpdateSet = "set"
	// SignalRelease takes a ReleaseSignal: give the slot back, or stop
	// waiting for one.
	SignalRelease = "release"
	// QuerySlots answers a View: limits, holders, waiters.
	QuerySlots = "slots"

	// SignalSlot is what the pool sends a waiter's own workflow when its
	// turn comes or its wait ends: a Notice.
	SignalSlot = "slot"
)

// The slot wing's activity a task workflow calls by name, and the error
// type of a request no retry can fix. The activity's name is the method's
// the worker registers (slotact.Activities.AcquireSlot): it never changes.
const (
	// ActivityAcquireSlot takes an AcquireSlotRequest and answers a
	// slots.Answer.
	ActivityAcquireSlot = "AcquireSlot"
	// ErrBadSlotRequest: the pool refused a request as malformed.
	// Retrying cannot help.
	ErrBadSlotRequest = "BadSlotRequest"
)

// AcquireSlotRequest asks a pool for a slot for one task's attempt.
type AcquireSlotRequest struct {
	Pool    string        `json:"pool"`
	Request slots.Request `json:"request"`
}

// Defaults of a pool.
const (
	// DefaultCheckEvery is how often the pool looks whether its holders'
	// workflows still run.
	DefaultCheckEvery = 30 * time.Second
	// LeaseChecks is how many checks in a row may fail to vouch for a
	// holder (its workflow could not be described) before it loses its
	// slot: the pool's lease is LeaseChecks times the check interval.
	LeaseChecks = 10
	// MinCheckEvery and MaxCheckEvery bound the check interval.
	MinCheckEvery = time.Second
	MaxCheckEvery = time.Hour
)

// WorkflowID is the one workflow id per pool.
func WorkflowID(pool string) string { return "karvi-slots-" + pool }

// PoolQueue is the task queue pools start on beside the workers' shared
// queue, which every worker also polls. A pool answers each batch of
// acquires in a workflow task of its own; on the shared queue that task
// waited behind the workflow tasks of every task starting at the same
// moment (the very tasks asking for slots), and with it every answer.
// Pools started before it existed stay on the shared queue, which still
// runs them.
func PoolQueue(taskQueue string) string { return taskQueue + "-slot-pools" }

// StartOptions start a pool's workflow on demand (update-with-start from
// an acquire or a set): the running one is used when there is one; a pool
// whose workflow was terminated starts afresh. taskQueue is the workers'
// shared queue; the pool runs on its PoolQueue.
func StartOptions(pool, taskQueue string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       WorkflowID(pool),
		TaskQueue:                PoolQueue(taskQueue),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            "Agent slot pool " + pool,
		StaticDetails: fmt.Sprintf("How many conductors run at once, across every task, run and worker that names pool **%s**. "+
			"`starter slots -pool %s` lists its holders and waiters.", pool, pool),
	}
}

// PoolInput starts a pool's workflow. A pool is started on demand by its
// first acquire (or set), so every field is optional.
type PoolInput struct {
	Pool string `json:"pool"`
	// Limits are a new pool's; nil: max_concurrent
	// slots.DefaultMaxConcurrent and no max_total.
	Limits *slots.Limits `json:"limits,omitempty"`
	// CheckEvery: DefaultCheckEvery when 0, at TimeScale.
	CheckEvery time.Duration `json:"checkEvery,omitempty"`
	// TimeScale divides the pool's default check interval (and so its
	// lease): the time scale of the worker or starter that started it
	// (internal/timescale); 0 is real time.
	TimeScale float64 `json:"timeScale,omitempty"`
	// ContinueAsNewAfter continues-as-new once history holds this many
	// events, besides Temporal's own suggestion (0: a default; tests set it
	// low to exercise the hand-over).
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
	// Resume is the pool's state handed over by continue-as-new; a client
	// never sets it.
	Resume json.RawMessage `json:"resume,omitempty"`
}

// MaxAcquireMany bounds the requests of one AcquireMany.
const MaxAcquireMany = 500

// AcquireMany is the acquires of many tasks, sent in one update.
type AcquireMany struct {
	Requests []slots.Request `json:"requests"`
}

// Validate refuses a batch the pool would refuse as a whole. A malformed
// request inside it is answered on its own (ManyAnswer.Error), so it does
// not fail the others.
func (m AcquireMany) Validate() error {
	if len(m.Requests) == 0 {
		return errors.New("requests: at least one is required")
	}
	if len(m.Requests) > MaxAcquireMany {
		return fmt.Errorf("requests: %d, at most %d in one update", len(m.Requests), MaxAcquireMany)
	}
	return nil
}

// AcquireManyResult answers an AcquireMany, one answer per request in
// the order asked.
type AcquireManyResult struct {
	Answers []ManyAnswer `json:"answers"`
}

// ManyAnswer is one request's answer in an AcquireManyResult: the pool's
// answer, or why the request was refused as malformed (Error, the
// refusal UpdateAcquire's validator would have given it).
type ManyAnswer struct {
	Answer slots.Answer `json:"answer"`
	Error  string       `json:"error,omitempty"`
}

// ReleaseSignal gives a key's slot back (or its place in line).
type ReleaseSignal struct {
	Key slots.Key `json:"key"`
	// Reason is for the pool's log: how the attempt ended.
	Reason string `json:"reason,omitempty"`
}

// Notice is the payload of SignalSlot: the pool's answer to a request that
// waited.
type Notice struct {
	Pool string `json:"pool"`
	slots.Notice
}

// SetRequest changes a pool's limits at run time.
type SetRequest struct {
	MaxConcurrent int `json:"maxConcurrent"`
	// MaxTotal: nil keeps the current limit; 0 lifts it.
	MaxTotal *int `json:"maxTotal,omitempty"`
	// CheckEvery: 0 keeps the current interval.
	CheckEvery time.Duration `json:"checkEvery,omitempty"`
}

// Validate refuses a request the pool would refuse, for callers that want
// to say so before reaching Temporal.
func (r SetRequest) Validate() error {
	l := slots.Limits{MaxConcurrent: r.MaxConcurrent}
	if r.MaxTotal != nil {
		l.MaxTotal = *r.MaxTotal
	}
	err := l.Validate()
	if r.CheckEvery != 0 && (r.CheckEvery < MinCheckEvery || r.CheckEvery > MaxCheckEvery) {
		err = errors.Join(err, fmt.Errorf("check every %s must be between %s and %s", r.CheckEvery, MinCheckEvery, MaxCheckEvery))
	}
	return err
}

// View answers QuerySlots.
type View struct {
	Pool   string       `json:"pool"`
	Limits slots.Limits `json:"limits"`
	// CheckEvery is how often the holders' workflows are looked at; Lease
	// how long a holder keeps its slot when they cannot be.
	CheckEvery time.Duration `json:"checkEvery"`
	Lease      time.Duration `json:"lease"`
	// Holders in the order they were granted; Waiters in line order.
	Holders   []HolderView `json:"holders"`
	Waiters   []WaiterView `json:"waiters"`
	Stats     slots.Stats  `json:"stats"`
	LastCheck time.Time    `json:"lastCheck,omitzero"`
	// Dropped counts holders let go because their workflow had closed.
	Dropped        int       `json:"dropped,omitempty"`
	ContinuedAsNew int       `json:"continuedAsNew"`
	UpdatedAt      time.Time `json:"updatedAt,omitzero"`
}

// HolderView is one holder.
type HolderView struct {
	Task       string    `json:"task"`
	Attempt    int       `json:"attempt"`
	Run        string    `json:"run,omitempty"`
	WorkflowID string    `json:"workflowId,omitempty"`
	Since      time.Time `json:"since"`
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
}

// WaiterView is one waiter.
type WaiterView struct {
	Position   int       `json:"position"`
	Task       string    `json:"task"`
	Attempt    int       `json:"attempt"`
	Run        string    `json:"run,omitempty"`
	WorkflowID string    `json:"workflowId,omitempty"`
	Since      time.Time `json:"since"`
	// Timeout is how long it agreed to wait (0: as long as it takes);
	// Deadline when it will be refused.
	Timeout  time.Duration `json:"timeout,omitempty"`
	Deadline time.Time     `json:"deadline,omitzero"`
}

// NewView is the view of a pool's state.
func NewView(name string, p *slots.Pool) View {
	v := View{Pool: name, Limits: p.Limits, Lease: p.Lease, Stats: p.Stats,
		Holders: []HolderView{}, Waiters: []WaiterView{}}
	for _, h := range p.Holders {
		v.Holders = append(v.Holders, HolderView{Task: h.Key.Task, Attempt: h.Key.Attempt, Run: h.Run,
			WorkflowID: h.Owner.WorkflowID, Since: h.Since, LeaseUntil: h.LeaseUntil})
	}
	for i, w := range p.Line() {
		v.Waiters = append(v.Waiters, WaiterView{Position: i + 1, Task: w.Key.Task, Attempt: w.Key.Attempt, Run: w.Run,
			WorkflowID: w.Owner.WorkflowID, Since: w.Since, Timeout: w.Timeout, Deadline: w.Deadline})
	}
	return v
}
