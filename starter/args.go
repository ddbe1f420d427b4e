package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"karvi-edda-temporal/api/run"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/temporalconn"
)

// command is one subcommand: its argument, what it does, and its own flags.
// Every command also takes the connection flags, before or after its name.
type command struct {
	name, arg, summary string
	flags              func(fs *flag.FlagSet, o *options)
	// run does the command (handlers.go).
	run func(*env) error
	// nargs is how many arguments arg names (default one); noArg: none.
	nargs int
	noArg bool
}

func (c *command) wantArgs() int {
	if c.noArg {
		return 0
	}
	return max(c.nargs, 1)
}

// options are the subcommands' own flags.
type options struct {
	budgetUSD     float64
	budgetAction  string
	repo          string
	featureBranch string
	wait          bool
	follow        bool
	json          bool
	reason        string
	templates     string
	attempt       int
	report        bool
	since         int64
	// Agent slots: the pool, a task's wait, and slots set's limits
	// (maxTotal nil: keep the pool's).
	pool          string
	slotTimeout   time.Duration
	maxConcurrent int
	maxTotal      *int
	checkEvery    time.Duration
	sched         scheduleOptions
	board         string
	// account: the agent account of a task, or the one to show or resume.
	account string
}

func followFlag(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.follow, "follow", false, "print phase progress until the task ends")
	jsonFlag(fs, o)
}

func jsonFlag(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.json, "json", false, "follow: one JSON object per change instead of lines for a person")
}

func reasonFlag(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.reason, "reason", "", "`reason` recorded with the signal")
}

func templatesFlag(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.templates, "templates", os.Getenv("KARVI_EDDA_TEMPLATES"), "`directory` of operator plan templates, one YAML per skill (env KARVI_EDDA_TEMPLATES)")
}

// commands may be two words ("run plan"): the second names what to do with
// the first.
var commands = []*command{
	{name: "plan", run: planCmd, arg: "<dispatch.json|->", summary: "print the plan.yaml a dispatch produces (no Temporal needed)",
		flags: func(fs *flag.FlagSet, o *options) {
			templatesFlag(fs, o)
			fs.IntVar(&o.attempt, "attempt", 1, "attempt `number`")
		}},
	{name: "run plan", run: runPlanCmd, arg: "<run.json|->", summary: "dry run of a run file: start order, models, plans (no Temporal needed)",
		flags: templatesFlag},
	{name: "run status", run: withClient(runStatusCmd), arg: "<slug>", summary: "where a run stands: tasks, graph, blockers (-json: status.json)",
		flags: runStatusFlags},
	{name: "start", run: withClient(startCmd), arg: "<dispatch.json|->", summary: "start the task's workflow",
		flags: func(fs *flag.FlagSet, o *options) {
			followFlag(fs, o)
			budgetFlags(fs, o)
			taskPoolFlags(fs, o)
			fs.StringVar(&o.account, "account", "", "agent `account` the task's conductors use: a usage limit pauses every task on it (default: the -pool's name, else the worker's -account, by default one per task queue)")
		}},
	{name: "cost", run: withClient(costCmd), arg: "<taskId|slug>", summary: "what a task (or a run) spent, by phase, model and skill, against its budget", flags: jsonOnlyFlag},
	{name: "abort", run: withClient(abortCmd), arg: "<taskId>", summary: "abort the task (signal abort)", flags: reasonFlag},
	{name: "resume", run: withClient(resumeCmd), arg: "<taskId>", summary: "end a task's pause (a usage limit, its budget) now (signal resume); its account stays paused", flags: reasonFlag},
	{name: "budget set", run: withClient(budgetSetCmd), arg: "<taskId>", summary: "set a running task's budget; a task paused for its budget resumes once it is not spent", flags: budgetSetFlags},
	{name: "account", run: withClient(accountCmd), noArg: true, summary: "an agent account: paused until when, by which task, its member tasks", flags: func(fs *flag.FlagSet, o *options) { accountFlag(fs, o); jsonOnlyFlag(fs, o) }},
	{name: "account resume", run: withClient(accountResumeCmd), noArg: true, summary: "end an agent account's pause now: every task paused for it resumes", flags: func(fs *flag.FlagSet, o *options) { accountFlag(fs, o); reasonFlag(fs, o); jsonOnlyFlag(fs, o) }},
	{name: "redispatch", run: withClient(redispatchCmd), arg: "<taskId>", summary: "new attempt (signal; starts a new run if the workflow closed)",
		flags: func(fs *flag.FlagSet, o *options) { followFlag(fs, o); reasonFlag(fs, o); taskPoolFlags(fs, o) }},
	{name: "status", run: withClient(statusCmd), arg: "<taskId>", summary: "query status (JSON)"},
	{name: "brief", run: withClient(briefCmd), arg: "<taskId>", summary: "query the brief (JSON)"},
	{name: "job", run: withClient(jobCmd), arg: "<taskId>", summary: "query the task as a job: attempts, verdicts, metrics (JSON, or -report)", flags: reportFlag},
	{name: "follow", run: withClient(followCmd), arg: "<taskId>", summary: "print phase progress until the task ends", flags: jsonFlag},
	{name: "events", run: withClient(eventsCmd), arg: "<taskId>", summary: "print the task's canonical events (-follow: until the task ends)",
		flags: eventsFlags},
	{name: "result", run: withClient(resultCmd), arg: "<taskId>", summary: "wait for and print the workflow result"},
	{name: "run start", run: withClient(runStartCmd), arg: "<run.json|->", summary: "start a run of dependent tasks", flags: runStartFlags},
	{name: "run pause", run: runUpdate(runapi.UpdatePause, nil), arg: "<slug>", summary: "start no new task of the run (running ones go on)"},
	{name: "run resume", run: runUpdate(runapi.UpdateResume, nil), arg: "<slug>", summary: "let a paused run start tasks again"},
	{name: "run budget set", run: runBudgetSetCmd, arg: "<slug>", summary: "set a run's budget (update budget); a run paused for its budget goes on once it is not spent", flags: runBudgetSetFlags},
	{name: "run skip", run: runTaskUpdate(runapi.UpdateSkip), arg: "<slug> <taskId>", nargs: 2, summary: "give up on a task; its dependents treat it as done"},
	{name: "run retry", run: runTaskUpdate(runapi.UpdateRetry), arg: "<slug> <taskId>", nargs: 2, summary: "queue a failed task again (or merge a rebased one again)"},
	{name: "run abort", run: runUpdate(runapi.UpdateAbort, func(o options) any { return runapi.AbortRequest{Reason: o.reason} }), arg: "<slug>", summary: "abort every running task and end the run", flags: reasonFlag},
	{name: "run events", run: withClient(runEventsCmd), arg: "<slug>", summary: "print the run's canonical events: its states and its tasks' (-follow: until the run ends)", flags: eventsFlags},
	{name: "run cost", run: withClient(runCostCmd), arg: "<slug>", summary: "what the run's tasks spent, by phase, task, model and skill, against its budget", flags: jsonOnlyFlag},
	{name: "slots", run: withClient(slotsCmd), noArg: true, summary: "the agent slot pools that run, or one pool's limits, holders and waiters (-pool)", flags: slotsFlags},
	{name: "slots set", run: withClient(slotsSetCmd), noArg: true, summary: "change an agent slot pool's limits now (starts the pool if it does not run)", flags: slotsSetFlags},
	{name: "intake status", run: withClient(intakeStatusCmd), noArg: true, summary: "what the karvi intake of a board follows, claimed and skipped, and why (-json: the whole status)",
		flags: intakeFlags},
	{name: "schedule create", run: scheduleCmd, arg: "<dispatch.json|run.json|->", summary: "an intent: fire a task or a run once (-run-at) or on a -cron, until it converges",
		flags: scheduleCreateFlags},
	{name: "schedule list", run: scheduleCmd, noArg: true, summary: "every intent: target, when, next fires, runs, last outcome, state", flags: scheduleListFlags},
	{name: "schedule update", run: scheduleCmd, arg: "<name>", summary: "change an intent's timing, limits, condition or target", flags: scheduleUpdateFlags},
	{name: "schedule trigger", run: scheduleCmd, arg: "<name>", summary: "fire an intent now"},
	{name: "schedule pause", run: scheduleCmd, arg: "<name>", summary: "stop an intent from firing", flags: reasonFlag},
	{name: "schedule unpause", run: scheduleCmd, arg: "<name>", summary: "let a paused intent, or one in error, fire again", flags: reasonFlag},
	{name: "schedule cancel", run: scheduleCmd, arg: "<name>", summary: "delete an intent and stop its fire (its target runs on)", flags: reasonFlag},
}

func eventsFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.follow, "follow", false, "keep printing events as they are stored until the workflow (task or run) has closed")
	fs.Int64Var(&o.since, "since", 0, "start after this many `bytes` of the stream: the size of what -json printed before")
	fs.BoolVar(&o.json, "json", false, "print the events as stored, one JSON object per line")
}

func budgetFlags(fs *flag.FlagSet, o *options) {
	fs.Float64Var(&o.budgetUSD, "budget", 0, "spending limit in `USD`: a warning at 80 %, the budget action at 100 % (0: none)")
	fs.StringVar(&o.budgetAction, "budget-action", "block", "at 100 % of the budget: `block` (abort, start nothing more), warn, or pause (wait for starter budget set / run budget set, or resume)")
}

func runBudgetSetFlags(fs *flag.FlagSet, o *options) {
	fs.Float64Var(&o.budgetUSD, "budget", 0, "the run's new spending limit in `USD` (required)")
	fs.StringVar(&o.budgetAction, "budget-action", "", "block, warn or pause (default: keep the run's)")
}

func jsonOnlyFlag(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
}

// taskPoolFlags: a task that waits for an agent slot.
func taskPoolFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.pool, "pool", "", "agent slot `pool` the task's conductor waits for (none: it starts at once; a running workflow keeps its own)")
	fs.DurationVar(&o.slotTimeout, "slot-timeout", 0, "with -pool: how long to wait in line before the attempt ends blocked (0: as long as it takes)")
}

func poolFlag(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.pool, "pool", taskapi.DefaultSlotPool, "agent slot `pool`")
}

func slotsFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.pool, "pool", "", "agent slot `pool` to show (default: list every pool that runs)")
	fs.BoolVar(&o.json, "json", false, "the pool's view as JSON")
}

func slotsSetFlags(fs *flag.FlagSet, o *options) {
	poolFlag(fs, o)
	fs.IntVar(&o.maxConcurrent, "max-concurrent", 0, "how many conductors may run at once (required, 1 to 10000)")
	fs.Func("max-total", "how many slots one run may be granted in all, `n` (0: no limit; default: keep the pool's)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not a number: %q", v)
		}
		o.maxTotal = &n
		return nil
	})
	fs.DurationVar(&o.checkEvery, "check-every", 0, "how often the pool looks whether its holders' workflows still run (default: keep the pool's)")
}

func runStartFlags(fs *flag.FlagSet, o *options) {
	budgetFlags(fs, o)
	fs.StringVar(&o.repo, "repo", "", "git repository `dir` (inside the worker's work root) the tasks work in, each on a worktree of its own")
	fs.StringVar(&o.featureBranch, "feature-branch", "", "`branch` the tasks' branches merge into (default feature/<slug>)")
	fs.BoolVar(&o.wait, "wait", false, "wait for the run to end and print its final status")
	fs.BoolVar(&o.follow, "follow", false, "redraw the run's view as it changes until it ends (as run status -follow)")
	fs.StringVar(&o.pool, "pool", "", "agent slot `pool` every task's conductor waits for (none: only the run's concurrency applies)")
}

// commandName joins a command's second (and third: "run budget set")
// word to name when together they name a command.
func commandName(name string, rest []string) (string, []string) {
	if len(rest) > 1 && lookup(name+" "+rest[0]+" "+rest[1]) != nil {
		return name + " " + rest[0] + " " + rest[1], rest[2:]
	}
	if len(rest) > 0 && lookup(name+" "+rest[0]) != nil {
		return name + " " + rest[0], rest[1:]
	}
	return name, rest
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// invocation is a command line, parsed.
type invocation struct {
	cmd  *command
	conn temporalconn.Flags
	opts options
	arg  string
	// args are all the arguments; arg is the first.
	args []string
}

// usageError is a mistake on the command line; cmd is the command it
// concerns, nil for the starter as a whole.
type usageError struct {
	msg string
	cmd *command
}

func (e *usageError) Error() string { return e.msg }

// helpRequest is -h, --help or `help`, for a command or (nil) for all.
type helpRequest struct{ cmd *command }

func (*helpRequest) Error() string { return "help requested" }

// flagSet is a flag set that prints nothing: errors and usage are printed
// once, by cli.
func flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// commandFlags is the flag set of c, connection flags included.
func commandFlags(c *command, conn *temporalconn.Flags, o *options) *flag.FlagSet {
	fs := flagSet("starter " + c.name)
	conn.Register(fs)
	if c.flags != nil {
		c.flags(fs, o)
	}
	return fs
}

// parseArgs reads `starter [connection flags] <command> [flags] <argument>`.
// A command's flags may also follow its argument (`status T5 -address X`);
// "--" ends the flags.
func parseArgs(args []string) (invocation, error) {
	inv := invocation{conn: temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue}}
	global := flagSet("starter")
	inv.conn.Register(global)
	if err := global.Parse(args); err == flag.ErrHelp {
		return inv, &helpRequest{}
	} else if err != nil {
		return inv, &usageError{msg: err.Error()}
	}
	rest := global.Args()
	if len(rest) == 0 {
		return inv, &usageError{msg: "no command given"}
	}
	name, rest := commandName(rest[0], rest[1:])
	if name == "help" {
		if len(rest) == 0 {
			return inv, &helpRequest{}
		}
		name, _ = commandName(rest[0], rest[1:])
		if c := lookup(name); c != nil {
			return inv, &helpRequest{cmd: c}
		}
	}
	inv.cmd = lookup(name)
	if inv.cmd == nil {
		return inv, &usageError{msg: fmt.Sprintf("unknown command %q", name)}
	}
	fs := commandFlags(inv.cmd, &inv.conn, &inv.opts)
	var positional []string
	for {
		if err := fs.Parse(rest); err == flag.ErrHelp {
			return inv, &helpRequest{cmd: inv.cmd}
		} else if err != nil {
			return inv, &usageError{msg: err.Error(), cmd: inv.cmd}
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if n := len(rest) - len(left); n > 0 && rest[n-1] == "--" {
			positional = append(positional, left...)
			break
		}
		positional = append(positional, left[0])
		rest = left[1:]
	}
	if want := inv.cmd.wantArgs(); len(positional) != want {
		if want == 0 {
			return inv, &usageError{cmd: inv.cmd,
				msg: fmt.Sprintf("%s takes no argument; got %q", inv.cmd.name, positional)}
		}
		what := "exactly one argument"
		if want > 1 {
			what = fmt.Sprintf("%d arguments", want)
		}
		return inv, &usageError{cmd: inv.cmd,
			msg: fmt.Sprintf("%s takes %s, %s; got %d", inv.cmd.name, what, inv.cmd.arg, len(positional))}
	}
	inv.args = positional
	if len(positional) > 0 {
		inv.arg = positional[0]
	}
	return inv, nil
}

const usageFooter = `TLS, API keys and profiles come from the temporal CLI's profile file and
environment (TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_CONFIG_FILE,
TEMPORAL_PROFILE; docs/configuration.md), payload encryption from
KARVI_TEMPORAL_CODEC_KEY. KARVI_EDDA_TIME_SCALE (tests and soaks: at 60 a
minute lasts a second) is handed to the tasks, runs and pools it starts, as
the worker's -time-scale. "starter <command> -h" shows a command's flags.
`

// printUsage prints the usage of c, or of the starter when c is nil.
func printUsage(w io.Writer, c *command) {
	conn := temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue}
	if c != nil {
		var o options
		fs := commandFlags(c, &conn, &o)
		fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags (the connection's may also come before %q):\n", strings.TrimSpace("starter "+c.name+" [flags] "+c.arg), c.summary, c.name)
		fs.SetOutput(w)
		fs.PrintDefaults()
		return
	}
	fmt.Fprint(w, "starter: start and operate karvi tasks, runs of dependent tasks, agent slot pools,\nagent accounts, schedule intents and the karvi intake on Temporal\n\n"+
		"Usage: starter [connection flags] <command> [flags] <argument>\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  starter %s\t%s\n", synopsis(c), c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, "\nConnection flags, before or after the command:\n")
	fs := flagSet("starter")
	conn.Register(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\n"+usageFooter)
}

// synopsis is c's command line with its own flags, e.g.
// "abort [-reason reason] <taskId>"; a command with many flags shows
// "[flags]" (its -h lists them).
const maxSynopsisFlags = 4

func synopsis(c *command) string {
	parts := []string{c.name}
	if c.flags != nil {
		var o options
		fs := flagSet(c.name)
		c.flags(fs, &o)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > maxSynopsisFlags {
			return strings.Join(append(parts, "[flags]", c.arg), " ")
		}
		fs.VisitAll(func(f *flag.Flag) {
			if name, _ := flag.UnquoteUsage(f); name != "" {
				parts = append(parts, fmt.Sprintf("[-%s %s]", f.Name, name))
			} else {
				parts = append(parts, fmt.Sprintf("[-%s]", f.Name))
			}
		})
	}
	if c.arg != "" {
		parts = append(parts, c.arg)
	}
	return strings.Join(parts, " ")
}
