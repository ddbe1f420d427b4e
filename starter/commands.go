package main

import (
	"flag"
	"os"

	"karvi-edda-temporal/api/run"
)

// commands are the starter's commands, and groups them as its usage lists
// them. A command is a row here: its name, argument, summary, and its flags
// with its handler (handlers.go); the command tree, its help and shell
// completion are made from these rows. It is set by init: the completion
// command reads the tree that holds it.
var (
	groups   []group
	commands []*command
)

func init() {
	groups = []group{
		{"Dry runs", []*command{
			{name: "plan", arg: "<dispatch.json|->", summary: "print the plan.yaml a dispatch produces (no Temporal needed)",
				declare: local((*planOpts).flags, planCmd)},
			{name: "run plan", arg: "<run.json|->", summary: "dry run of a run file: start order, models, plans (no Temporal needed)",
				declare: local((*templatesOpts).flags, runPlanCmd)},
		}},
		{"Tasks", []*command{
			{name: "start", arg: "<dispatch.json|->", summary: "start the task's workflow",
				declare: remote((*startOpts).flags, startCmd)},
			{name: "status", arg: "<taskId>", summary: "query status (JSON)", declare: remote(nil, statusCmd)},
			{name: "brief", arg: "<taskId>", summary: "query the brief (JSON)", declare: remote(nil, briefCmd)},
			{name: "job", arg: "<taskId>", summary: "query the task as a job: attempts, verdicts, metrics (JSON, or -report)",
				declare: remote((*jobOpts).flags, jobCmd)},
			{name: "follow", arg: "<taskId>", summary: "print phase progress until the task ends",
				declare: remote((*followJSONOpts).flags, followCmd)},
			{name: "events", arg: "<taskId>", summary: "print the task's canonical events (-follow: until the task ends)",
				declare: remote((*eventsOpts).flags, eventsCmd)},
			{name: "result", arg: "<taskId>", summary: "wait for and print the workflow result", declare: remote(nil, resultCmd)},
			{name: "cost", arg: "<taskId|slug>", summary: "what a task (or a run) spent, by phase, model and skill, against its budget",
				declare: remote((*jsonOpts).flags, costCmd)},
			{name: "abort", arg: "<taskId>", summary: "abort the task (signal abort)", declare: remote((*reasonOpts).flags, abortCmd)},
			{name: "resume", arg: "<taskId>", summary: "end a task's pause (a usage limit, its budget) now (signal resume); its account stays paused",
				declare: remote((*reasonOpts).flags, resumeCmd)},
			{name: "redispatch", arg: "<taskId>", summary: "new attempt (signal; starts a new run if the workflow closed)",
				declare: remote((*redispatchOpts).flags, redispatchCmd)},
			{name: "budget set", arg: "<taskId>", summary: "set a running task's budget; a task paused for its budget resumes once it is not spent",
				declare: local((*budgetChangeOpts).taskFlags, budgetSetCmd)},
		}},
		{"Runs of dependent tasks", []*command{
			{name: "run start", arg: "<run.json|->", summary: "start a run of dependent tasks",
				declare: remote((*runStartOpts).flags, runStartCmd)},
			{name: "run status", arg: "<slug>", summary: "where a run stands: tasks, graph, blockers (-json: status.json)",
				declare: remote((*runStatusOpts).flags, runStatusCmd)},
			{name: "run events", arg: "<slug>", summary: "print the run's canonical events: its states and its tasks' (-follow: until the run ends)",
				declare: remote((*eventsOpts).flags, runEventsCmd)},
			{name: "run cost", arg: "<slug>", summary: "what the run's tasks spent, by phase, task, model and skill, against its budget",
				declare: remote((*jsonOpts).flags, runCostCmd)},
			{name: "run pause", arg: "<slug>", summary: "start no new task of the run (running ones go on)",
				declare: remote(nil, runUpdate(runapi.UpdatePause))},
			{name: "run resume", arg: "<slug>", summary: "let a paused run start tasks again",
				declare: remote(nil, runUpdate(runapi.UpdateResume))},
			{name: "run budget set", arg: "<slug>", summary: "set a run's budget (update budget); a run paused for its budget goes on once it is not spent",
				declare: local((*budgetChangeOpts).runFlags, runBudgetSetCmd)},
			{name: "run skip", arg: "<slug> <taskId>", nargs: 2, summary: "give up on a task; its dependents treat it as done",
				declare: remote(nil, runTaskUpdate(runapi.UpdateSkip))},
			{name: "run retry", arg: "<slug> <taskId>", nargs: 2, summary: "queue a failed task again (or merge a rebased one again)",
				declare: remote(nil, runTaskUpdate(runapi.UpdateRetry))},
			{name: "run abort", arg: "<slug>", summary: "abort every running task and end the run",
				declare: remote((*reasonOpts).flags, runAbortCmd)},
		}},
		{"Agent slots and accounts", []*command{
			{name: "slots", noArg: true, summary: "the agent slot pools that run, or one pool's limits, holders and waiters (-pool)",
				declare: remote((*slotsOpts).flags, slotsCmd)},
			{name: "slots set", noArg: true, summary: "change an agent slot pool's limits now (starts the pool if it does not run)",
				declare: remote((*slotsSetOpts).flags, slotsSetCmd)},
			{name: "account", noArg: true, summary: "an agent account: paused until when, by which task, its member tasks",
				declare: remote((*accountOpts).flags, accountCmd)},
			{name: "account resume", noArg: true, summary: "end an agent account's pause now: every task paused for it resumes",
				declare: remote((*accountResumeOpts).flags, accountResumeCmd)},
		}},
		{"Karvi intake", []*command{
			{name: "intake status", noArg: true, summary: "what the karvi intake of a board follows, claimed and skipped, and why (-json: the whole status)",
				declare: remote((*intakeOpts).flags, intakeStatusCmd)},
		}},
		{"Schedule intents", []*command{
			{name: "schedule create", arg: "<dispatch.json|run.json|->", summary: "an intent: fire a task or a run once (-run-at) or on a -cron, until it converges",
				declare: local((*scheduleOptions).createFlags, scheduleCreateCmd)},
			{name: "schedule list", noArg: true, summary: "every intent: target, when, next fires, runs, last outcome, state",
				declare: remote((*scheduleListOpts).flags, scheduleListCmd)},
			{name: "schedule update", arg: "<name>", summary: "change an intent's timing, limits, condition or target",
				declare: local((*scheduleOptions).updateFlags, scheduleUpdateCmd)},
			{name: "schedule trigger", arg: "<name>", summary: "fire an intent now", declare: remote(nil, scheduleTriggerCmd)},
			{name: "schedule pause", arg: "<name>", summary: "stop an intent from firing",
				declare: remote((*reasonOpts).flags, schedulePauseCmd)},
			{name: "schedule unpause", arg: "<name>", summary: "let a paused intent, or one in error, fire again",
				declare: remote((*reasonOpts).flags, scheduleUnpauseCmd)},
			{name: "schedule cancel", arg: "<name>", summary: "delete an intent and stop its fire (its target runs on)",
				declare: remote((*reasonOpts).flags, scheduleCancelCmd)},
		}},
		{"Shell", []*command{
			{name: "completion", arg: "<bash|zsh|fish>", summary: "print a completion script of the starter's commands and flags for the shell",
				declare: local(nil, completionCmd)},
		}},
	}
	for _, g := range groups {
		commands = append(commands, g.commands...)
	}
}

// The flags that several commands share, each declared once.

// reasonOpts: a reason recorded with what the command does.
type reasonOpts struct{ reason string }

func (o *reasonOpts) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.reason, "reason", "", "`reason` recorded with the signal")
}

// jsonOpts: JSON for a program instead of a table.
type jsonOpts struct{ json bool }

func (o *jsonOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
}

// followJSONOpts: how a followed task's progress is printed.
type followJSONOpts struct{ json bool }

func (o *followJSONOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "follow: one JSON object per change instead of lines for a person")
}

// followOpts: follow a task once the command has done its part.
type followOpts struct {
	follow bool
	followJSONOpts
}

func (o *followOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.follow, "follow", false, "print phase progress until the task ends")
	o.followJSONOpts.flags(fs)
}

type templatesOpts struct{ templates string }

func (o *templatesOpts) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.templates, "templates", os.Getenv("KARVI_EDDA_TEMPLATES"), "`directory` of operator plan templates, one YAML per skill (env KARVI_EDDA_TEMPLATES)")
}

type planOpts struct {
	templatesOpts
	attempt int
}

func (o *planOpts) flags(fs *flag.FlagSet) {
	o.templatesOpts.flags(fs)
	fs.IntVar(&o.attempt, "attempt", 1, "attempt `number`")
}

// budgetOpts: the budget a task or run starts with.
type budgetOpts struct {
	usd    float64
	action string
}

func (o *budgetOpts) flags(fs *flag.FlagSet) {
	fs.Float64Var(&o.usd, "budget", 0, "spending limit in `USD`: a warning at 80 %, the budget action at 100 % (0: none)")
	fs.StringVar(&o.action, "budget-action", "block", "at 100 % of the budget: `block` (abort, start nothing more), warn, or pause (wait for starter budget set / run budget set, or resume)")
}

// budgetChangeOpts: a new budget for a running task or run.
type budgetChangeOpts budgetOpts

func (o *budgetChangeOpts) taskFlags(fs *flag.FlagSet) { o.declare(fs, "task") }
func (o *budgetChangeOpts) runFlags(fs *flag.FlagSet)  { o.declare(fs, "run") }

func (o *budgetChangeOpts) declare(fs *flag.FlagSet, whose string) {
	fs.Float64Var(&o.usd, "budget", 0, "the "+whose+"'s new spending limit in `USD` (required)")
	fs.StringVar(&o.action, "budget-action", "", "block, warn or pause (default: keep the "+whose+"'s)")
}

type startOpts struct {
	followOpts
	budgetOpts
	taskPoolOpts
	account string
}

func (o *startOpts) flags(fs *flag.FlagSet) {
	o.followOpts.flags(fs)
	o.budgetOpts.flags(fs)
	o.taskPoolOpts.flags(fs)
	fs.StringVar(&o.account, "account", "", "agent `account` the task's conductors use: a usage limit pauses every task on it (default: the -pool's name, else the worker's -account, by default one per task queue)")
}

func (o *startOpts) check() error { return o.taskPoolOpts.check() }

type redispatchOpts struct {
	followOpts
	reasonOpts
	taskPoolOpts
}

func (o *redispatchOpts) flags(fs *flag.FlagSet) {
	o.followOpts.flags(fs)
	o.reasonOpts.flags(fs)
	o.taskPoolOpts.flags(fs)
}

func (o *redispatchOpts) check() error { return o.taskPoolOpts.check() }

type runStartOpts struct {
	budgetOpts
	repo, featureBranch string
	wait, follow        bool
	pool                string
}

func (o *runStartOpts) flags(fs *flag.FlagSet) {
	o.budgetOpts.flags(fs)
	fs.StringVar(&o.repo, "repo", "", "git repository `dir` (inside the worker's work root) the tasks work in, each on a worktree of its own")
	fs.StringVar(&o.featureBranch, "feature-branch", "", "`branch` the tasks' branches merge into (default feature/<slug>)")
	fs.BoolVar(&o.wait, "wait", false, "wait for the run to end and print its final status")
	fs.BoolVar(&o.follow, "follow", false, "redraw the run's view as it changes until it ends (as run status -follow)")
	fs.StringVar(&o.pool, "pool", "", "agent slot `pool` every task's conductor waits for (none: only the run's concurrency applies)")
}

func (o *runStartOpts) check() error {
	if o.pool == "" {
		return nil
	}
	return checkPool(o.pool)
}

type eventsOpts struct {
	follow bool
	since  int64
	json   bool
}

func (o *eventsOpts) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.follow, "follow", false, "keep printing events as they are stored until the workflow (task or run) has closed")
	fs.Int64Var(&o.since, "since", 0, "start after this many `bytes` of the stream: the size of what -json printed before")
	fs.BoolVar(&o.json, "json", false, "print the events as stored, one JSON object per line")
}
