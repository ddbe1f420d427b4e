// Package wfstart runs a test's callbacks in the SDK's test workflow
// environment counting from the moment the workflow function began, not
// from the start of the environment.
//
// The environment begins the workflow function only after a round trip
// through a goroutine of its own (it looks for a mock of the workflow
// there). Until then it counts the workflow as busy and fires a delayed
// callback by the wall clock, once as much real time has passed as the
// callback's delay. So a callback registered a few milliseconds into the
// run can run before the workflow function did anything: on a loaded
// machine a query there fails with "unknown queryType", though the
// workflow sets its handlers before its first blocking call. A callback
// given to Hook.After is registered only once the workflow function has
// begun, and runs after the function first blocked, when everything it
// sets up before that is in place.
package wfstart

import (
	"sync"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Hook notices when the environment's workflow function begins. Install
// it before ExecuteWorkflow.
type Hook struct {
	interceptor.WorkerInterceptorBase
	env *testsuite.TestWorkflowEnvironment

	mu      sync.Mutex
	started bool
	waiting []func()
}

// Install puts a hook on env through its worker options, which it
// replaces: a test that sets worker options of its own adds the hook to
// their Interceptors instead.
func Install(env *testsuite.TestWorkflowEnvironment) *Hook {
	h := &Hook{env: env}
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{h}})
	return h
}

// After runs f in the environment's main loop d of workflow time after
// the workflow function began (at once when it began already). With d 0,
// f runs as soon as the function first blocked.
func (h *Hook) After(d time.Duration, f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started {
		h.env.RegisterDelayedCallback(f, d)
		return
	}
	h.waiting = append(h.waiting, func() { h.env.RegisterDelayedCallback(f, d) })
}

// begin registers the callbacks that waited. It runs on the workflow's
// goroutine while the main loop waits for the workflow to block; a
// delayed callback registered there reaches the main loop after that.
func (h *Hook) begin() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
	for _, register := range h.waiting {
		register()
	}
	h.waiting = nil
}

// InterceptWorkflow is the hook's part of interceptor.WorkerInterceptor.
func (h *Hook) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &inbound{hook: h}
	in.Next = next
	return in
}

type inbound struct {
	interceptor.WorkflowInboundInterceptorBase
	hook *Hook
}

// ExecuteWorkflow is where the workflow function begins, after the
// environment's look for a mock. A child workflow's start is not the
// test's workflow's.
func (in *inbound) ExecuteWorkflow(ctx workflow.Context, input *interceptor.ExecuteWorkflowInput) (any, error) {
	if workflow.GetInfo(ctx).ParentWorkflowExecution == nil {
		in.hook.begin()
	}
	return in.Next.ExecuteWorkflow(ctx, input)
}
