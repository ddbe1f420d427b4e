// Package proc runs the conductor as a detached process that outlives the
// worker which started it, and lets any later worker re-attach to it from the
// run directory alone.
//
// The conductor costs real money and must never run twice for one attempt, so
// Start is idempotent per run directory, including across a worker crash
// between spawning and recording the process (see Start). The process runs in
// its own session under a tiny /bin/sh supervisor that records the exit
// status, because a restarted worker is no longer its parent and cannot wait
// for it. Liveness is judged by pid plus kernel start time, so a recycled pid
// is never mistaken for the conductor, and Stop signals the whole process
// group so agent children die with it.
//
// Linux only: it relies on /proc, setsid and flock.
package proc
