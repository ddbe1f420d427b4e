// Package slotapi is the public face of an agent slot pool's workflow
// (SlotPoolWorkflow, one per pool, id karvi-slots-<pool>): its names, its
// input, the requests its updates take, the signals it receives and sends,
// its query's answer, and Pools, every Temporal call a client makes on a
// pool. Clients (the starter, the slot activities, tests, the temporal CLI)
// and the task workflow use it; it links nothing of the worker.
package slotapi
