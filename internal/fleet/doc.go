// Package fleet is what lets several workers on several machines share one
// task queue: each worker is a host with a name, an attempt's conductor
// activities travel on that host's own task queue (Queue), and a host that
// comes back after its tasks moved on stops the conductors no workflow
// owns any more (Sweeper, Judge).
//
// A conductor, its files and its process live on the machine whose worker
// started it, so every activity that reads its log, inspects its process
// or stops it must run there. docs/fleet.md tells the whole design:
// routing, drain, host loss and fencing.
package fleet
