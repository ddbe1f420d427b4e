package main

import (
	"fmt"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/mapping"
)

// The handlers of the commands table's rows (args.go), in its order.

func planCmd(e *env) error {
	return printPlan(e.inv.arg, e.stdin, e.stdout, e.inv.opts.templates, e.inv.opts.attempt)
}

func runPlanCmd(e *env) error {
	return printRunPlan(e.inv.arg, e.stdin, e.stdout, e.inv.opts.templates)
}

func runStatusCmd(e *env, cl client.Client) error {
	return runStatus(e.ctx, temporalRuns{cl}, e.inv.arg, e.stdout, runStatusOptionsFor(e.stdout, e.inv.opts))
}

func startCmd(e *env, cl client.Client) error {
	o := e.inv.opts
	d, err := readDispatch(e.inv.arg, e.stdin)
	if err != nil {
		return err
	}
	budget, err := budgetOf(o)
	if err != nil {
		return err
	}
	if o.account != "" {
		if err := accountapi.ValidName(o.account); err != nil {
			return &usageError{msg: err.Error()}
		}
	}
	if err := start(e.ctx, cl, e.queue, taskapi.TaskInput{Dispatch: d, Budget: budget, Slots: slotRequest(o), Account: o.account}, e.stdout); err != nil {
		return err
	}
	if o.follow {
		return followTask(e.ctx, cl, d.TaskID, e.stdout, followOptionsFor(e.stdout, o.json))
	}
	return nil
}

func costCmd(e *env, cl client.Client) error {
	return printTaskOrRunCost(e.ctx, cl, e.inv.arg, e.inv.opts.json, e.stdout)
}

func abortCmd(e *env, cl client.Client) error {
	return signalTask(e.ctx, cl, e.inv.arg, taskapi.SignalAbort, taskapi.AbortSignal{Reason: e.inv.opts.reason}, e.stdout)
}

func resumeCmd(e *env, cl client.Client) error {
	return signalTask(e.ctx, cl, e.inv.arg, taskapi.SignalResume, taskapi.ResumeSignal{Reason: e.inv.opts.reason}, e.stdout)
}

func redispatchCmd(e *env, cl client.Client) error {
	o := e.inv.opts
	if err := redispatch(e.ctx, cl, e.queue, e.inv.arg, o.reason, slotRequest(o), e.stdout); err != nil {
		return err
	}
	if o.follow {
		return followTask(e.ctx, cl, e.inv.arg, e.stdout, followOptionsFor(e.stdout, o.json))
	}
	return nil
}

func statusCmd(e *env, cl client.Client) error {
	var s taskapi.Status
	if err := query(e.ctx, cl, e.inv.arg, taskapi.QueryStatus, &s); err != nil {
		return err
	}
	return printJSON(e.stdout, s)
}

func briefCmd(e *env, cl client.Client) error {
	var b mapping.Brief
	if err := query(e.ctx, cl, e.inv.arg, taskapi.QueryBrief, &b); err != nil {
		return err
	}
	return printJSON(e.stdout, b)
}

func jobCmd(e *env, cl client.Client) error {
	return printJob(e.ctx, cl, e.inv.arg, e.inv.opts.report, e.stdout)
}

func followCmd(e *env, cl client.Client) error {
	return followTask(e.ctx, cl, e.inv.arg, e.stdout, followOptionsFor(e.stdout, e.inv.opts.json))
}

func eventsCmd(e *env, cl client.Client) error {
	return printEvents(e.ctx, cl, e.queue, taskEvents(e.inv.arg), eventsOptionsFor(e.stdout, e.inv.opts), e.stdout)
}

func resultCmd(e *env, cl client.Client) error {
	res, err := taskapi.Tasks{Client: cl}.Result(e.ctx, e.inv.arg, "")
	if err != nil {
		return fmt.Errorf("task %s: %w", e.inv.arg, err)
	}
	return printJSON(e.stdout, res)
}

func runStartCmd(e *env, cl client.Client) error {
	return startRun(e.ctx, cl, e.queue, e.inv, e.stdin, e.stdout)
}

// runUpdate is the handler of a run command that sends the run workflow an
// update; arg makes its argument from the command line (nil: none).
func runUpdate(name string, arg func(o options) any) func(*env) error {
	return withClient(func(e *env, cl client.Client) error {
		var a any
		if arg != nil {
			a = arg(e.inv.opts)
		}
		return updateRun(e.ctx, cl, e.inv.arg, name, a, e.stdout)
	})
}

// runTaskUpdate is the handler of `run skip` and `run retry`.
func runTaskUpdate(name string) func(*env) error {
	return withClient(func(e *env, cl client.Client) error {
		return retryOrSkip(e.ctx, cl, e.inv.arg, name, runapi.TaskRequest{Task: e.inv.args[1], Reason: e.inv.opts.reason}, e.stdout)
	})
}

func runEventsCmd(e *env, cl client.Client) error {
	return printEvents(e.ctx, cl, e.queue, runEvents(e.inv.arg), eventsOptionsFor(e.stdout, e.inv.opts), e.stdout)
}

func runCostCmd(e *env, cl client.Client) error {
	return printRunCost(e.ctx, cl, e.inv.arg, e.inv.opts.json, e.stdout)
}

func slotsCmd(e *env, cl client.Client) error {
	return showSlots(e.ctx, cl, e.inv.opts.pool, e.inv.opts.json, e.stdout)
}

func slotsSetCmd(e *env, cl client.Client) error {
	return setSlots(e.ctx, cl, e.queue, e.inv.opts.pool, setRequest(e.inv.opts), e.stdout)
}

func intakeStatusCmd(e *env, cl client.Client) error {
	return showIntake(e.ctx, cl, e.inv.opts.board, e.inv.opts.json, e.stdout)
}

// scheduleCmd runs the schedule commands, which reach Temporal on their own.
func scheduleCmd(e *env) error {
	return scheduleCommand(e.ctx, e.inv, e.stdin, e.stdout)
}
