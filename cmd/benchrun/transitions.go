package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/mapping"
)

// sampleOf picks k tasks spread evenly over tasks (all of them when fewer).
func sampleOf(tasks []*task, k int) []*task {
	if len(tasks) <= k {
		return tasks
	}
	out := make([]*task, 0, k)
	for i := range k {
		out = append(out, tasks[i*len(tasks)/k])
	}
	return out
}

// transitionCount is a workflow's state transitions as the server counts
// them, when it was read, and the run it belongs to.
type transitionCount struct {
	n     int64
	at    time.Time
	runID string
}

func (r *rig) transitionsOf(ctx context.Context, t *task) (transitionCount, bool) {
	d, err := taskapi.Tasks{Client: r.e.cl}.Describe(ctx, t.id, "")
	if err != nil {
		return transitionCount{}, false
	}
	info := d.GetWorkflowExecutionInfo()
	return transitionCount{n: info.GetStateTransitionCount(), at: time.Now(), runID: info.GetExecution().GetRunId()},
		info.GetCloseTime() == nil
}

// transitionsBetween counts, once every task of the level has started,
// the state transitions of a sample of tasks over capacityWindow, and
// keeps those whose conductor wrote no phase boundary in the window (nor
// within a second of it, the checkpoint that follows one): what a task
// costs the server while its agent works.
func (r *rig) transitionsBetween(ctx context.Context, tasks []*task, spread time.Duration) (Transitions, error) {
	// Spread: once the last task started, when a third of them are in the
	// middle of a phase. At once: in the middle of the second phase.
	wait := spread + 15*time.Second
	if spread == 0 {
		wait = 45 * time.Second
	}
	select {
	case <-ctx.Done():
		return Transitions{}, ctx.Err()
	case <-time.After(wait):
	}
	sample := sampleOf(tasks, capacitySample)
	beats0, _ := r.heartbeatCalls()
	running0 := r.runningTasks(tasks)
	first := make([]transitionCount, len(sample))
	running := make([]bool, len(sample))
	for i, t := range sample {
		first[i], running[i] = r.transitionsOf(ctx, t)
	}
	select {
	case <-ctx.Done():
		return Transitions{}, ctx.Err()
	case <-time.After(capacityWindow):
	}
	var beatsPerMin float64
	if beats1, ok := r.heartbeatCalls(); ok && running0 > 0 {
		beatsPerMin = (beats1 - beats0) / float64(running0) / capacityWindow.Minutes()
	}
	var perMin []float64
	for i, t := range sample {
		second, still := r.transitionsOf(ctx, t)
		if !running[i] || !still || second.runID != first[i].runID {
			continue
		}
		plan := mapping.AttemptPlanName(t.id, 1, mapping.AttemptNonce(taskapi.WorkflowID(t.id), second.runID))
		events, err := bench.ReadEvents(filepath.Join(t.cwd, ".edda", "conductor", plan, "events.jsonl"))
		if err != nil {
			continue
		}
		if boundaryWithin(events, first[i].at.Add(-time.Second), second.at.Add(time.Second)) {
			continue
		}
		perMin = append(perMin, float64(second.n-first[i].n)/second.at.Sub(first[i].at).Minutes())
	}
	if len(perMin) == 0 {
		return Transitions{Heartbeats: beatsPerMin, WindowSeconds: capacityWindow.Seconds()},
			fmt.Errorf("no sampled task ran through the window without a phase boundary")
	}
	return Transitions{Heartbeats: beatsPerMin, Between: mean(perMin), BetweenTasks: len(perMin),
		WindowSeconds: capacityWindow.Seconds()}, nil
}

// runningTasks counts the tasks karvi shows in progress.
func (r *rig) runningTasks(tasks []*task) int {
	n := 0
	for _, t := range tasks {
		if kt, ok := r.fakes[temporalC].Task(t.id); ok && kt.Status == "in_progress" {
			n++
		}
	}
	return n
}

// heartbeatCalls is the number of heartbeats the worker sent so far, from
// its Prometheus endpoint (the SDK's request counter).
func (r *rig) heartbeatCalls() (float64, bool) {
	if r.metrics == "" {
		return 0, false
	}
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var total float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !(strings.HasPrefix(line, "temporal_request{") || strings.HasPrefix(line, "temporal_request_total{")) ||
			!strings.Contains(line, `operation="RecordActivityTaskHeartbeat"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		total += v
		found = true
	}
	return total, found
}

// histogram reads a histogram of the worker's Prometheus endpoint: the
// count and the sum (seconds) of the series whose name has the given
// fragment and whose labels hold label, added up.
func (r *rig) histogram(name, label string) (count, sum float64, ok bool) {
	if r.metrics == "" {
		return 0, 0, false
	}
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		brace := strings.IndexByte(line, '{')
		if brace < 0 || !strings.Contains(line[:brace], name) || !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(line[:brace], "_count"):
			count += v
			ok = true
		case strings.HasSuffix(line[:brace], "_sum"):
			sum += v
		}
	}
	return count, sum, ok
}

// boundaryWithin says whether a phase started or ended between from and to.
func boundaryWithin(events []bench.EventStamp, from, to time.Time) bool {
	for _, ev := range events {
		switch ev.Type {
		case mapping.EventPlanStart, mapping.EventPhaseStart, mapping.EventPhasePassed, mapping.EventPhaseFailed,
			mapping.EventPhaseSkipped, mapping.EventPlanCompleted, mapping.EventPlanAborted:
			if ev.At.After(from) && ev.At.Before(to) {
				return true
			}
		}
	}
	return false
}

// transitionsOverall is the mean, over tasks that ended, of each one's
// state transitions per minute of its whole life.
func (r *rig) transitionsOverall(ctx context.Context, tasks []*task) (float64, int) {
	var perMin []float64
	for _, t := range tasks {
		d, err := taskapi.Tasks{Client: r.e.cl}.Describe(ctx, t.id, "")
		if err != nil {
			continue
		}
		info := d.GetWorkflowExecutionInfo()
		if info.GetCloseTime() == nil {
			continue
		}
		life := info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime())
		if life <= 0 {
			continue
		}
		perMin = append(perMin, float64(info.GetStateTransitionCount())/life.Minutes())
	}
	if len(perMin) == 0 {
		return 0, 0
	}
	return mean(perMin), len(perMin)
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// filePeak samples a process's open files and inotify watches until
// stopped, keeping each one's peak.
type filePeak struct {
	stop         func()
	mu           sync.Mutex
	fds, watches int
}

func sampleFiles(pid int, every time.Duration) *filePeak {
	p := &filePeak{}
	p.stop = sampleEvery(every, func() {
		fds, watches := openFiles(pid)
		p.mu.Lock()
		p.fds, p.watches = max(p.fds, fds), max(p.watches, watches)
		p.mu.Unlock()
	})
	return p
}

// openFiles counts a process's open file descriptors and the watches of
// its inotify instances (one "inotify wd:" line each in fdinfo).
func openFiles(pid int) (fds, watches int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range entries {
		fds++
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || target != "anon_inode:inotify" {
			continue
		}
		watches += inotifyWatches(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
	}
	return fds, watches
}

func inotifyWatches(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "inotify wd:") {
			n++
		}
	}
	return n
}

// slowest names the level's slowest events, their task, and writes the
// history of the task with the slowest of all to dir, for the trace of a
// missed target.
func (r *rig) slowest(ctx context.Context, tasks []*task, dir string, n int) []string {
	type slow struct {
		t *task
		s bench.Sample
	}
	var all []slow
	for _, t := range tasks {
		events, err := bench.ReadEvents(t.eventsPath)
		if err != nil {
			continue
		}
		for _, s := range bench.Match(events, r.fakes[temporalC].Writes(t.id)).Samples {
			all = append(all, slow{t, s})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].s.Latency > all[j].s.Latency })
	var out []string
	for i := 0; i < n && i < len(all); i++ {
		s := all[i]
		out = append(out, fmt.Sprintf("%s %s written %s, %s late", s.t.id, s.s.Type, s.s.At.Format("15:04:05.000"), s.s.Latency.Round(time.Millisecond)))
	}
	if len(all) > 0 {
		it := r.e.cl.GetWorkflowHistory(ctx, taskapi.WorkflowID(all[0].t.id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var lines []string
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			lines = append(lines, fmt.Sprintf("%d %s %s", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), ev.GetEventType()))
		}
		_ = os.WriteFile(filepath.Join(dir, "slowest-"+all[0].t.id+".history.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	}
	return out
}
