// Package taskapi is the task workflow's public face: its names, its input,
// the payloads of its signals, the answers of its queries and its result,
// the summary a client starts it with, and Tasks, every Temporal call a
// client makes on a task (start, next attempt, signals, queries, result,
// event reads). Clients (the starter, the intake and intent activities,
// tests, benchmarks) need only this and mapping; the worker's activity
// types stay out of their builds.
package taskapi
