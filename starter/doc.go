// Command starter is the command line of this runtime: it starts, signals,
// follows and inspects task workflows (start, status, brief, job, follow,
// events, abort, redispatch, resume, budget, cost, result), runs of
// dependent tasks (run start|status|events|pause|resume|retry|skip|abort|
// budget|cost), agent slot pools (slots), schedule intents (schedule),
// agent accounts (account) and the karvi intake (intake status), and prints
// the plan.yaml a DispatchPlan would produce, or a run's order and plans,
// without Temporal (the dry runs: plan, run plan). `starter -h` lists the
// commands; docs/operating.md shows them at work.
//
// Each command is a row of commands.go: its name, argument, summary, and
// its options type, whose flags method declares each of its flags once on
// the command's flag set, with its handler. cli.go makes the rows an ffcli
// command tree, parsed with the standard flag package (-flag value,
// -flag=value); help, the usage's groups and the completion scripts of
// completion.go are all read from that tree.
package main
