// Package taskapi is the task workflow's public face: its names, its input,
// the payloads of its signals, the answers of its queries and its result,
// and the summary a client starts it with. Clients (the starter, a karvi
// integration, the temporal CLI's JSON) need only this and mapping; the
// worker's activity types stay out of their builds.
package taskapi
