package main

import (
	"fmt"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// The handlers of the commands' rows (commands.go), in their order.

func planCmd(e *env, o *planOpts) error {
	return printPlan(e.inv.arg, e.stdin, e.stdout, o.templates, o.attempt)
}

func runPlanCmd(e *env, o *templatesOpts) error {
	return printRunPlan(e.inv.arg, e.stdin, e.stdout, o.templates)
}

func startCmd(e *env, cl client.Client, o *startOpts) error {
	d, err := readDispatch(e.inv.arg, e.stdin)
	if err != nil {
		return err
	}
	budget, err := budgetOf(o.budgetOpts)
	if err != nil {
		return err
	}
	if o.account != "" {
		if err := accountapi.ValidName(o.account); err != nil {
			return &usageError{msg: err.Error()}
		}
	}
	if err := start(e.ctx, cl, e.queue, taskapi.TaskInput{Dispatch: d, Budget: budget, Slots: slotRequest(o.taskPoolOpts), Account: o.account}, e.stdout); err != nil {
		return err
	}
	if o.follow {
		return followTask(e.ctx, cl, d.TaskID, e.stdout, followOptionsFor(e.stdout, o.json))
	}
	return nil
}

func statusCmd(e *env, cl client.Client, _ *noFlags) error {
	var s taskapi.Status
	if err := query(e.ctx, cl, e.inv.arg, taskapi.QueryStatus, &s); err != nil {
		return err
	}
	return printJSON(e.stdout, s)
}

func briefCmd(e *env, cl client.Client, _ *noFlags) error {
	var b mapping.Brief
	if err := query(e.ctx, cl, e.inv.arg, taskapi.QueryBrief, &b); err != nil {
		return err
	}
	return printJSON(e.stdout, b)
}

func jobCmd(e *env, cl client.Client, o *jobOpts) error {
	return printJob(e.ctx, cl, e.inv.arg, o.report, e.stdout)
}

func followCmd(e *env, cl client.Client, o *followJSONOpts) error {
	return followTask(e.ctx, cl, e.inv.arg, e.stdout, followOptionsFor(e.stdout, o.json))
}

func eventsCmd(e *env, cl client.Client, o *eventsOpts) error {
	return printEvents(e.ctx, cl, e.queue, taskEvents(e.inv.arg), eventsOptionsFor(e.stdout, *o), e.stdout)
}

func resultCmd(e *env, cl client.Client, _ *noFlags) error {
	res, err := taskapi.Tasks{Client: cl}.Result(e.ctx, e.inv.arg, "")
	if err != nil {
		return fmt.Errorf("task %s: %w", e.inv.arg, err)
	}
	return printJSON(e.stdout, res)
}

func costCmd(e *env, cl client.Client, o *jsonOpts) error {
	return printTaskOrRunCost(e.ctx, cl, e.inv.arg, o.json, e.stdout)
}

func abortCmd(e *env, cl client.Client, o *reasonOpts) error {
	return signalTask(e.ctx, cl, e.inv.arg, taskapi.SignalAbort, taskapi.AbortSignal{Reason: o.reason}, e.stdout)
}

func resumeCmd(e *env, cl client.Client, o *reasonOpts) error {
	return signalTask(e.ctx, cl, e.inv.arg, taskapi.SignalResume, taskapi.ResumeSignal{Reason: o.reason}, e.stdout)
}

func redispatchCmd(e *env, cl client.Client, o *redispatchOpts) error {
	if err := redispatch(e.ctx, cl, e.queue, e.inv.arg, o.reason, slotRequest(o.taskPoolOpts), e.stdout); err != nil {
		return err
	}
	if o.follow {
		return followTask(e.ctx, cl, e.inv.arg, e.stdout, followOptionsFor(e.stdout, o.json))
	}
	return nil
}

func runStartCmd(e *env, cl client.Client, o *runStartOpts) error {
	return startRun(e.ctx, cl, e.queue, e.inv.arg, *o, e.stdin, e.stdout)
}

func runStatusCmd(e *env, cl client.Client, o *runStatusOpts) error {
	return runStatus(e.ctx, temporalRuns{cl}, e.inv.arg, e.stdout, runStatusOptionsFor(e.stdout, *o))
}

func runEventsCmd(e *env, cl client.Client, o *eventsOpts) error {
	return printEvents(e.ctx, cl, e.queue, runEvents(e.inv.arg), eventsOptionsFor(e.stdout, *o), e.stdout)
}

func runCostCmd(e *env, cl client.Client, o *jsonOpts) error {
	return printRunCost(e.ctx, cl, e.inv.arg, o.json, e.stdout)
}

// runUpdate is the handler of a run command that sends the run workflow an
// update without an argument.
func runUpdate(name string) func(*env, client.Client, *noFlags) error {
	return func(e *env, cl client.Client, _ *noFlags) error {
		return updateRun(e.ctx, cl, e.inv.arg, name, nil, e.stdout)
	}
}

// runTaskUpdate is the handler of `run skip` and `run retry`.
func runTaskUpdate(name string) func(*env, client.Client, *noFlags) error {
	return func(e *env, cl client.Client, _ *noFlags) error {
		return retryOrSkip(e.ctx, cl, e.inv.arg, name, runapi.TaskRequest{Task: e.inv.args[1]}, e.stdout)
	}
}

func runAbortCmd(e *env, cl client.Client, o *reasonOpts) error {
	return updateRun(e.ctx, cl, e.inv.arg, runapi.UpdateAbort, runapi.AbortRequest{Reason: o.reason}, e.stdout)
}

func slotsCmd(e *env, cl client.Client, o *slotsOpts) error {
	return showSlots(e.ctx, cl, o.pool, o.json, e.stdout)
}

func slotsSetCmd(e *env, cl client.Client, o *slotsSetOpts) error {
	return setSlots(e.ctx, cl, e.queue, o.pool, setRequest(*o), e.stdout)
}

func intakeStatusCmd(e *env, cl client.Client, o *intakeOpts) error {
	return showIntake(e.ctx, cl, o.board, o.json, e.stdout)
}
