// Package observe fills a soak.Observed: it reads what the system left
// behind (the work roots' run directories and conductor files, the brief
// sink, the runs' status.json, the webhook receiver's file, the workers'
// logs), asks the task workflows their status, cost and job queries, and
// samples /proc and the open workflows in the background while the soak
// runs (Sampler). The rules that judge an Observed are in package soak and
// do no I/O.
//
// A driver uses it so:
//
//	j, _ := observe.OpenJournal(out + "/journal.jsonl") // j.Append(soak.Record{...}) for each act
//	chk := observe.NewChecker(observe.CheckerConfig{
//		Sources: observe.Sources{
//			Roots:        []observe.Root{{Host: "h1", Dir: h1Work}, {Host: "h2", Dir: h2Work}},
//			Board:        observe.FakeBoard(karvi), // or observe.FileBoard(sinkDir)
//			Workflows:    observe.TemporalWorkflows(client),
//			JournalPath:  out + "/journal.jsonl",
//			WebhooksPath: out + "/webhooks.jsonl", // lines from observe.WebhookLine
//			WorkerLogs:   []observe.WorkerLog{{Host: "h1", Path: h1Log}, {Host: "h2", Path: h2Log}},
//		},
//		Check:        soak.Config{}, // Grace, Stale, Slack, CostTolerance
//		ObservedPath: out + "/observed.json",
//	})
//	chk.Start(ctx)      // samples until Final
//	chk.Watch(taskID)   // optional: tasks with a run directory are found anyway
//	vs, err := chk.Live() // any time: the continuous invariants so far
//	...                 // every workflow ended; server and workers still up
//	vs, err = chk.Final(ctx, tasks, runSlugs)
//	...                 // the driver stops everything it started
//	left, err := chk.Leftovers([]observe.Started{{PID: workerPID, What: "worker", Host: "h1"}})
//
// Final and Leftovers return every violation they judged, and an error
// naming what could not be read (a soak reports it; the checks ran on the
// rest). The pieces (Sampler, Collect, ReadPlans, ReadWebhooks,
// ReadFenceStops, ReadRunStatus, Leftovers, LiveConductors) are exported
// for a driver that composes them otherwise.
//
// The sampler's cost is bounded whatever the number of tasks: one pass
// over /proc and one glob of the run records a tick (200ms), a readdir of
// the run directories once a second, and at most QueriesPerTick status
// queries a tick (a task at most once a second, the least recently asked
// first; the cost query too for a task with a budget). A sample that shows
// nothing new is kept once a second at most.
package observe
