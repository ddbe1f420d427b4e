// Command starter is the command line of this runtime: it starts, signals,
// follows and inspects task workflows (start, status, brief, job, follow,
// events, abort, redispatch, resume, budget, cost, result), runs of
// dependent tasks (run start|status|events|pause|resume|retry|skip|abort|
// budget|cost), agent slot pools (slots), schedule intents (schedule),
// agent accounts (account) and the karvi intake (intake status), and prints
// the plan.yaml a DispatchPlan would produce, or a run's order and plans,
// without Temporal (the dry runs: plan, run plan). `starter -h` lists the
// commands; docs/operating.md shows them at work.
package main
