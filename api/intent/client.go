package intentapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/intent"
)

// Intents are the operations on schedule intents, through a Temporal
// client.
type Intents struct {
	Client client.Client
	// Converter decodes what the schedules hold; it must be the client's
	// (payload encryption included). Nil is the SDK's default.
	Converter converter.DataConverter
	// TaskQueue is where new intents' fires (and their targets) run.
	TaskQueue string
	Quota     intent.Quota
	// Now is the clock specs are built and checked against; nil is
	// time.Now.
	Now func() time.Time
}

// View is an intent as a person (or a test) looks at it.
type View struct {
	Name   string        `json:"name"`
	Spec   intent.Spec   `json:"spec"`
	Status intent.Status `json:"status"`
	// Note is the schedule's note: why it is paused.
	Note string `json:"note,omitempty"`
	// Next are the schedule's next fire times, as the server has them;
	// none while it is paused.
	Next []time.Time `json:"next,omitempty"`
	// State is the intent's state: the running fire's, else the last
	// completed fire's.
	State intent.State `json:"state"`
	// Firing is the workflow id of the fire under way, if any.
	Firing string `json:"firing,omitempty"`
	// Actions counts the fires the schedule started; MissedCatchUpWindow
	// the fire times it let pass because they were older than the
	// catch-up window when it could fire again.
	Actions             int             `json:"actions"`
	MissedCatchUpWindow int             `json:"missedCatchUpWindow"`
	CatchUpWindow       intent.Duration `json:"catchUpWindow"`
	TaskQueue           string          `json:"taskQueue"`
}

// ErrNotFound: no intent has that name.
var ErrNotFound = errors.New("no such intent")

func (x *Intents) now() time.Time {
	if x.Now != nil {
		return x.Now()
	}
	return time.Now()
}

func (x *Intents) converter() converter.DataConverter {
	if x.Converter != nil {
		return x.Converter
	}
	return converter.GetDefaultDataConverter()
}

func (x *Intents) handle(ctx context.Context, name string) client.ScheduleHandle {
	return x.Client.ScheduleClient().GetHandle(ctx, ScheduleID(name))
}

// describe reads an intent's schedule and the spec in its action.
func (x *Intents) describe(ctx context.Context, name string) (*client.ScheduleDescription, intent.Spec, error) {
	desc, err := x.handle(ctx, name).Describe(ctx)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, intent.Spec{}, fmt.Errorf("%w named %s (schedule %s)", ErrNotFound, name, ScheduleID(name))
		}
		return nil, intent.Spec{}, fmt.Errorf("intent %s: describe schedule: %w", name, err)
	}
	spec, _, err := x.specOf(desc.Schedule.Action)
	if err != nil {
		return nil, intent.Spec{}, fmt.Errorf("intent %s: %w", name, err)
	}
	return desc, spec, nil
}

// specOf decodes the intent from a schedule's action, and its task queue.
func (x *Intents) specOf(a client.ScheduleAction) (intent.Spec, string, error) {
	wa, ok := a.(*client.ScheduleWorkflowAction)
	if !ok || len(wa.Args) != 1 {
		return intent.Spec{}, "", errors.New("the schedule's action is not an intent's fire")
	}
	if name, _ := wa.Workflow.(string); name != FireWorkflowName {
		return intent.Spec{}, "", fmt.Errorf("the schedule starts %v, not %s", wa.Workflow, FireWorkflowName)
	}
	var in FireInput
	switch arg := wa.Args[0].(type) {
	case *commonpb.Payload:
		if err := x.converter().FromPayload(arg, &in); err != nil {
			return intent.Spec{}, "", fmt.Errorf("decode the schedule's fire input: %w", err)
		}
	case FireInput:
		in = arg
	default:
		return intent.Spec{}, "", fmt.Errorf("the schedule's fire input is a %T", arg)
	}
	return in.Intent, wa.TaskQueue, nil
}

// Create makes the intent's schedule, within the quota.
func (x *Intents) Create(ctx context.Context, s intent.Spec) error {
	members, err := x.members(ctx)
	if err != nil {
		return err
	}
	if err := x.Quota.Admit(members, s.Name, s.Owner); err != nil {
		return err
	}
	_, err = x.Client.ScheduleClient().Create(ctx, Options(s, x.TaskQueue, x.now()))
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("intent %s already exists (schedule %s): update it, or cancel it first", s.Name, ScheduleID(s.Name))
	}
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", ScheduleID(s.Name), err)
	}
	return nil
}

// names lists the intents' names, from the schedules' list (which the
// server may show a moment late).
func (x *Intents) names(ctx context.Context) ([]string, error) {
	it, err := x.Client.ScheduleClient().List(ctx, client.ScheduleListOptions{PageSize: 200})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	var names []string
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		if name, ok := NameOf(e.ID); ok && e.WorkflowType.Name == FireWorkflowName {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// members are the intents as the quota counts them.
func (x *Intents) members(ctx context.Context) ([]intent.Member, error) {
	names, err := x.names(ctx)
	if err != nil {
		return nil, err
	}
	var ms []intent.Member
	for _, name := range names {
		desc, spec, err := x.describe(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue // cancelled since it was listed
		}
		if err != nil {
			return nil, err
		}
		ms = append(ms, intent.Member{Name: name, Owner: spec.Owner,
			Status: intent.StatusOf(desc.Schedule.State.Paused, desc.Schedule.State.Note)})
	}
	return ms, nil
}

// List shows every intent, by name.
func (x *Intents) List(ctx context.Context) ([]View, error) {
	names, err := x.names(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]View, 0, len(names))
	for _, name := range names {
		v, err := x.Get(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		views = append(views, v)
	}
	return views, nil
}

// Get shows one intent.
func (x *Intents) Get(ctx context.Context, name string) (View, error) {
	desc, spec, err := x.describe(ctx, name)
	if err != nil {
		return View{}, err
	}
	_, queue, _ := x.specOf(desc.Schedule.Action)
	v := View{
		Name: name, Spec: spec, TaskQueue: queue,
		Status:              intent.StatusOf(desc.Schedule.State.Paused, desc.Schedule.State.Note),
		Note:                desc.Schedule.State.Note,
		Next:                desc.Info.NextActionTimes,
		Actions:             desc.Info.NumActions,
		MissedCatchUpWindow: desc.Info.NumActionsMissedCatchupWindow,
		State:               intent.State{Status: intent.StatusActive},
	}
	if desc.Schedule.State.Paused {
		v.Next = nil // the spec's times go on, but a paused schedule takes none
	}
	if desc.Schedule.Policy != nil {
		v.CatchUpWindow = intent.Duration(desc.Schedule.Policy.CatchupWindow)
	}
	running := map[string]bool{}
	for _, r := range desc.Info.RunningWorkflows {
		running[r.WorkflowID] = true
		v.Firing = r.WorkflowID
	}
	if v.Firing != "" && x.queryState(ctx, v.Firing, &v.State) == nil {
		return v, nil
	}
	// The newest fire that ended with a result holds the state.
	for _, a := range slices.Backward(desc.Info.RecentActions) {
		if a.StartWorkflowResult == nil || running[a.StartWorkflowResult.WorkflowID] {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var st intent.State
		err := x.Client.GetWorkflow(rctx, a.StartWorkflowResult.WorkflowID, "").Get(rctx, &st)
		cancel()
		if err == nil {
			v.State = st
			break
		}
	}
	return v, nil
}

func (x *Intents) queryState(ctx context.Context, workflowID string, st *intent.State) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	val, err := x.Client.QueryWorkflow(qctx, workflowID, "", QueryState)
	if err != nil {
		return err
	}
	return val.Get(st)
}

// Update changes an intent: change edits the request the intent was built
// from, and the result is built and checked again. Its status is kept (an
// intent in error stays paused until unpaused); one that has converged
// cannot be changed, and nor can its owner.
func (x *Intents) Update(ctx context.Context, name string, change func(*intent.Request)) (intent.Spec, error) {
	var updated intent.Spec
	err := x.handle(ctx, name).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			sched := in.Description.Schedule
			spec, queue, err := x.specOf(sched.Action)
			if err != nil {
				return nil, err
			}
			if st := intent.StatusOf(sched.State.Paused, sched.State.Note); st == intent.StatusConverged {
				return nil, fmt.Errorf("intent %s has converged (%s): cancel it and create it anew", name, sched.State.Note)
			}
			req := intent.RequestFor(spec)
			change(&req)
			if req.Owner != spec.Owner {
				return nil, fmt.Errorf("owner: an intent keeps its owner (%s); cancel it and create it anew", spec.Owner)
			}
			now := x.now()
			if updated, err = intent.Build(req, now); err != nil {
				return nil, err
			}
			if updated.Name != spec.Name {
				return nil, fmt.Errorf("name: an intent keeps its name (%s)", spec.Name)
			}
			s, p := Spec(updated), Policies(updated, now)
			sched.Spec, sched.Policy, sched.Action = &s, &p, Action(updated, queue)
			return &client.ScheduleUpdate{Schedule: &sched}, nil
		},
	})
	if err != nil {
		return intent.Spec{}, x.notFound(name, err)
	}
	return updated, nil
}

func (x *Intents) notFound(name string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w named %s (schedule %s)", ErrNotFound, name, ScheduleID(name))
	}
	return err
}

// Pause stops an active intent from firing; the note says why. A fire
// under way goes on, but does not retry after a failure.
func (x *Intents) Pause(ctx context.Context, name, note string) error {
	desc, _, err := x.describe(ctx, name)
	if err != nil {
		return err
	}
	if st := intent.StatusOf(desc.Schedule.State.Paused, desc.Schedule.State.Note); st != intent.StatusActive {
		return fmt.Errorf("intent %s is not active: %s", name, desc.Schedule.State.Note)
	}
	return x.notFound(name, x.handle(ctx, name).Pause(ctx, client.SchedulePauseOptions{Note: note}))
}

// Unpause lets a paused intent, or one whose circuit opened, fire again
// (within the quota); its next fire starts with no error counted. One
// that has converged stays so.
func (x *Intents) Unpause(ctx context.Context, name, note string) error {
	desc, spec, err := x.describe(ctx, name)
	if err != nil {
		return err
	}
	switch st := intent.StatusOf(desc.Schedule.State.Paused, desc.Schedule.State.Note); st {
	case intent.StatusActive:
		return fmt.Errorf("intent %s is not paused", name)
	case intent.StatusConverged:
		return fmt.Errorf("intent %s has converged (%s): cancel it and create it anew", name, desc.Schedule.State.Note)
	}
	members, err := x.members(ctx)
	if err != nil {
		return err
	}
	if err := x.Quota.Admit(members, name, spec.Owner); err != nil {
		return err
	}
	return x.notFound(name, x.handle(ctx, name).Unpause(ctx, client.ScheduleUnpauseOptions{Note: note}))
}

// Trigger fires an intent now. It is refused while a fire is under way
// (the trigger would only be skipped as an overlap) and for an intent in
// error or converged; a paused intent may be fired by hand.
func (x *Intents) Trigger(ctx context.Context, name string) error {
	desc, _, err := x.describe(ctx, name)
	if err != nil {
		return err
	}
	if r := desc.Info.RunningWorkflows; len(r) > 0 {
		return fmt.Errorf("intent %s is firing (%s): trigger it again once that fire ends", name, r[0].WorkflowID)
	}
	switch intent.StatusOf(desc.Schedule.State.Paused, desc.Schedule.State.Note) {
	case intent.StatusError:
		return fmt.Errorf("intent %s is in error (%s): update it if need be, and unpause it first", name, desc.Schedule.State.Note)
	case intent.StatusConverged:
		return fmt.Errorf("intent %s has converged (%s): cancel it and create it anew", name, desc.Schedule.State.Note)
	}
	return x.notFound(name, x.handle(ctx, name).Trigger(ctx, client.ScheduleTriggerOptions{}))
}

// Cancel deletes an intent: its schedule, and the fire under way, if any.
// The target that fire started (a task, a run) is not stopped: it is an
// ordinary workflow, aborted as any other.
func (x *Intents) Cancel(ctx context.Context, name, reason string) error {
	desc, _, err := x.describe(ctx, name)
	if err != nil {
		return err
	}
	if err := x.handle(ctx, name).Delete(ctx); err != nil {
		return x.notFound(name, err)
	}
	for _, r := range desc.Info.RunningWorkflows {
		err := x.Client.TerminateWorkflow(ctx, r.WorkflowID, "", "intent cancelled: "+reason)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("intent %s: stop its fire %s: %w", name, r.WorkflowID, err)
		}
	}
	return nil
}
