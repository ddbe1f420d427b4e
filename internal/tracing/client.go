package tracing

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/traces"
)

// current is the process's tracing, for WithRoot: the places that start a
// task or a run (the starter, the intake, a schedule's fire) know what
// they start, not how the process was set up.
var current atomic.Pointer[Tracing]

// Setup sets tracing up from the environment (FromEnv) for a process that
// talks to Temporal: the SDK's OpenTelemetry interceptor joins opts's
// interceptors (a worker made from that client uses it too), and the
// tracing becomes the process's. It returns nil when tracing is off.
func Setup(ctx context.Context, opts *client.Options) (*Tracing, error) {
	t, err := FromEnv(ctx)
	if err != nil || t == nil {
		return nil, err
	}
	ic, err := t.Interceptor()
	if err != nil {
		return nil, fmt.Errorf("tracing: Temporal interceptor: %w", err)
	}
	opts.Interceptors = append(opts.Interceptors, ic)
	current.Store(t)
	return t, nil
}

// WithRoot makes ctx start a workflow as a child of the trace's root of
// id: the trace of a task or a run begins where it is started, whatever
// span ctx carried (an intake's activity, a schedule's fire), and every
// span of the workflow, its activities and its agents joins it. ctx is
// returned as is when the process has no tracing.
func WithRoot(ctx context.Context, id traces.Identity) context.Context {
	return current.Load().RootContext(ctx, id)
}
