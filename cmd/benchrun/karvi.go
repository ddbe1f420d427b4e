package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"karvi-edda-temporal/testkit/karvifake"
)

// KarviLimitResult is one row of the "karvi at defaults" scenario: short
// tasks started at once against a karvi fake with or without karvi's rate
// limit, by one worker build.
type KarviLimitResult struct {
	Worker     string  `json:"worker"` // "before" (an older build) or "after"
	KarviLimit string  `json:"karviLimit"`
	Tasks      int     `json:"tasks"`
	Seconds    float64 `json:"seconds"`
	Requests   int     `json:"requests"`
	PerTask    float64 `json:"requestsPerTask"`
	Refused    int     `json:"refused"`
	Completed  int     `json:"completed"`
	// Routes is the fake's count of requests by route ("PATCH
	// /api/brief/:id", ...; refusals under "429 " and their route).
	Routes map[string]int `json:"routes,omitempty"`
	// Shapes counts the tasks by the requests that named them: "PUT
	// /api/brief/:id 1, POST /api/tasks/:id/status 2, ..." -> tasks.
	Shapes map[string]int `json:"shapes,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// karviDefaults runs 30 short tasks at once against a fake karvi with its
// default rate limit (120 requests a minute per client address, 429 with
// Retry-After beyond it) and with the limit off, and reports the wall time
// from the first start to the last end, the requests karvi saw per task and
// its 429 refusals. BENCH_KARVI_BEFORE_BIN names a directory with an older
// worker build (one without -karvi-rate-limit) to measure as "before".
func (e *env) karviDefaults(ctx context.Context) error {
	n := e.pick(30, 6)
	type variant struct {
		worker, limit string
		o             rigOptions
	}
	vs := []variant{
		{"after", "off", rigOptions{fakeLimit: karvifake.RateLimitOff, args: []string{"-karvi-rate-limit", "off"}}},
		{"after", "120/min (default)", rigOptions{fakeLimit: karvifake.DefaultRateLimit}},
	}
	if dir := os.Getenv("BENCH_KARVI_BEFORE_BIN"); dir != "" {
		vs = append([]variant{
			{"before", "off", rigOptions{fakeLimit: karvifake.RateLimitOff, binDir: dir}},
			{"before", "120/min (default)", rigOptions{fakeLimit: karvifake.DefaultRateLimit, binDir: dir}},
		}, vs...)
	}
	for i, v := range vs {
		name := fmt.Sprintf("karvi-%d", i)
		res, err := e.karviRound(ctx, name, n, v.o)
		res.Worker, res.KarviLimit = v.worker, v.limit
		if err != nil {
			res.Error = firstLine(err.Error())
		}
		e.logf("karvi %s worker, limit %s: %d tasks in %.0fs, %d requests (%.1f a task), %d refused, %d completed %s",
			v.worker, v.limit, n, res.Seconds, res.Requests, res.PerTask, res.Refused, res.Completed, res.Error)
		e.logf("karvi %s worker, limit %s: requests a task by route: %s", v.worker, v.limit, perTaskRoutes(res.Routes, n))
		for _, s := range slices.Sorted(maps.Keys(res.Shapes)) {
			e.logf("karvi %s worker, limit %s: %d tasks sent %s", v.worker, v.limit, res.Shapes[s], s)
		}
		e.results.Karvi = append(e.results.Karvi, res)
	}
	return nil
}

func (e *env) karviRound(ctx context.Context, name string, n int, o rigOptions) (KarviLimitResult, error) {
	res := KarviLimitResult{Tasks: n}
	r, err := e.newRigWith(name, o)
	if err != nil {
		return res, err
	}
	defer r.close()
	var tasks []*task
	for i := range n {
		t, err := r.newTask(fmt.Sprintf("%s-t%d", name, i), "sequential",
			"[sim checks=pass delay=200ms]", nil)
		if err != nil {
			return res, err
		}
		tasks = append(tasks, t)
	}
	runErr := r.run(ctx, tasks, runOptions{wait: true, timeout: 15 * time.Minute})
	var first, last time.Time
	res.Shapes = map[string]int{}
	for _, t := range tasks {
		res.Shapes[perTaskRoutes(r.fakes[temporalC].TaskStats(t.id).Routes, 1)]++
		if first.IsZero() || t.started.Before(first) {
			first = t.started
		}
		if t.ended.After(last) {
			last = t.ended
		}
		if t.err == nil && t.result.Outcome.TaskStatus == "completed" {
			if kt, ok := r.fakes[temporalC].Task(t.id); ok && kt.Status == "completed" {
				res.Completed++
			}
		}
	}
	st := r.fakes[temporalC].Stats()
	res.Seconds = last.Sub(first).Seconds()
	res.Requests, res.Refused = st.Requests, st.Refused
	res.PerTask = float64(st.Requests) / float64(n)
	res.Routes = st.Routes
	return res, runErr
}

// perTaskRoutes renders routes divided by n tasks, in route order.
func perTaskRoutes(routes map[string]int, n int) string {
	var out []string
	for _, r := range slices.Sorted(maps.Keys(routes)) {
		out = append(out, fmt.Sprintf("%s %.2f", r, float64(routes[r])/float64(n)))
	}
	return strings.Join(out, ", ")
}
