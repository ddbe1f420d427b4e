// Package observe fills a soak.Observed: it reads what the system left
// behind (the work root's run directories, the brief sink, the karvi fake,
// status.json files, the webhook receiver's log, the workers' logs), asks
// the task workflows their status, job and cost, and samples /proc and the
// workflows in the background while the soak runs (Sampler). The rules
// that judge an Observed are in package soak and do no I/O.
package observe
