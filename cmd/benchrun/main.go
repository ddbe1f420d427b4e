// Command benchrun is `make bench`: it starts a Temporal dev server, runs
// the worker binary against the conductor simulator and karvi fakes, and
// measures event-to-PATCH latency, throughput, cost per task and worker
// memory, side by side with a direct tail-and-PATCH loop and a 250 ms
// polling loop fed by the same events. It prints a report and writes
// results.json, report.md, profiles and logs under -out. It never fails on
// a figure: it fails only when something did not work.
//
//	benchrun [-out DIR] [-quick] [-only latency1,latency100,...]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/bench"
	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/testkit/devenv"
)

var allScenarios = []string{"gobench", "latency1", "latency100", "tuned", "cost", "throughput", "tasks", "rss", "capacity", "runs", "slots", "karvi", "traces"}

type step struct {
	name string
	fn   func(context.Context) error
}

type env struct {
	root, out       string
	quick           bool
	serverAddr      string
	serverPID       int
	serverTuned     bool
	cl              client.Client
	sim             string
	worker          string
	templates       string
	tmpls           mapping.TemplateSet
	exampleDispatch mapping.DispatchPlan
	log             io.Writer
	workerArgs      []string
	results         *Results
	// -cluster: every group on the running cluster, in a namespace of its
	// own (namespace); dbPID is PostgreSQL's, for its CPU.
	cluster        *clusterOptions
	clusterGroups  int
	namespace      string
	dbPID          int
	capacityLevels []int
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.log, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", ".run/bench", "directory for results.json, report.md, profiles and logs")
	quick := flag.Bool("quick", false, "fewer runs and tasks: a smoke test of the harness, not figures to quote")
	only := flag.String("only", strings.Join(allScenarios, ","), "comma-separated scenarios to run")
	tuned := flag.String("tuned-config", strings.Join(tunedConfig, ","), "dynamic config of the tuned dev server, comma-separated KEY=VALUE")
	allTuned := flag.Bool("tuned-server", false, "run every scenario on the tuned dev server (-tuned-config), not the default one")
	workerArgs := flag.String("worker-args", "", "extra flags for every worker, space-separated (to compare settings, e.g. -tail-linger 1ms)")
	onCluster := flag.Bool("cluster", false, "run on the PostgreSQL-backed server of `make cluster` (-cluster-address) instead of dev servers")
	clusterAddr := flag.String("cluster-address", "127.0.0.1:17233", "the cluster's frontend, with -cluster")
	clusterDir := flag.String("cluster-dir", ".run/cluster", "the cluster's state directory (its pid files), with -cluster")
	levels := flag.String("capacity-levels", "", "the capacity scenario's task counts, comma-separated, all run unless a task fails (default 500,1000,2000,3000, stopping after the first whose p99 passes 1 s in both start modes; -quick 20,50)")
	flag.Parse()
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) {
			return fmt.Errorf("-only: unknown scenario %q (have %s)", s, strings.Join(allScenarios, ", "))
		}
		want[s] = true
	}

	tunedConfig = nil
	for _, kv := range strings.Split(*tuned, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			if !strings.Contains(kv, "=") {
				return fmt.Errorf("-tuned-config: %q is not KEY=VALUE", kv)
			}
			tunedConfig = append(tunedConfig, kv)
		}
	}
	root, err := devenv.RepoRoot()
	if err != nil {
		return err
	}
	e := &env{root: root, quick: *quick, log: os.Stderr, workerArgs: strings.Fields(*workerArgs)}
	if e.capacityLevels, err = parseLevels(*levels); err != nil {
		return err
	}
	if *onCluster {
		dir, err := filepath.Abs(*clusterDir)
		if err != nil {
			return err
		}
		e.cluster = &clusterOptions{addr: *clusterAddr, dir: dir}
	}
	e.out, err = filepath.Abs(*out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(e.out, 0o755); err != nil {
		return err
	}
	e.results = &Results{Started: time.Now().UTC().Format(time.RFC3339), Quick: *quick, Machine: machineInfo(),
		Command: strings.Join(os.Args, " "), WorkerArgs: *workerArgs, Tuned: strings.Join(tunedConfig, " "), TunedServer: *allTuned}
	if e.cluster != nil {
		e.results.Cluster = e.cluster.addr
	}

	if e.sim, err = devenv.Binary("eddasim"); err != nil {
		return err
	}
	if e.worker, err = devenv.Binary("worker"); err != nil {
		return err
	}
	e.templates = filepath.Join(root, "bench", "templates")
	if e.tmpls, err = mapping.LoadTemplates(os.DirFS(e.templates)); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, "testdata", "examples", "A", "dispatch.json"))
	if err != nil {
		return err
	}
	if e.exampleDispatch, err = mapping.ParseDispatchPlan(data); err != nil {
		return err
	}

	ctx := context.Background()
	started := time.Now()
	if want["gobench"] {
		if err := e.goBench(ctx); err != nil {
			return fmt.Errorf("gobench: %w", err)
		}
	}
	// Each group runs against its own dev server, so one group's closed
	// workflows and history do not weigh on the next.
	groups := []struct {
		tuned bool
		steps []step
	}{
		{false, []step{{"latency1", e.latency1}, {"latency100", e.latency100}}},
		{true, []step{{"tuned", e.tunedLatency}}},
		{false, []step{{"cost", e.cost}, {"throughput", e.throughput}, {"tasks", e.tasksPerMinute}}},
		{false, []step{{"rss", e.rss}}},
		{false, []step{{"capacity", e.capacity}}},
		{false, []step{{"runs", e.runs}}},
		{false, []step{{"slots", e.slotsScenario}}},
		{false, []step{{"karvi", e.karviDefaults}}},
		{false, []step{{"traces", e.tracesScenario}}},
	}
	for _, g := range groups {
		var steps []step
		for _, s := range g.steps {
			if want[s.name] {
				steps = append(steps, s)
			}
		}
		if len(steps) == 0 {
			continue
		}
		stop, err := e.startServer(ctx, g.tuned || *allTuned)
		if err != nil {
			return err
		}
		for _, s := range steps {
			t0 := time.Now()
			e.logf("== %s (load average %s)", s.name, loadAvg())
			if err := s.fn(ctx); err != nil {
				stop()
				return fmt.Errorf("%s: %w", s.name, err)
			}
			e.logf("== %s done in %s", s.name, time.Since(t0).Round(time.Second))
		}
		stop()
	}
	e.results.LoadAtEnd = loadAvg()
	e.results.Seconds = time.Since(started).Seconds()

	data, err = json.MarshalIndent(e.results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(e.out, "results.json"), data, 0o644); err != nil {
		return err
	}
	report := e.results.Markdown()
	if err := os.WriteFile(filepath.Join(e.out, "report.md"), []byte(report), 0o644); err != nil {
		return err
	}
	fmt.Print(report)
	fmt.Printf("\nresults: %s\n", filepath.Join(e.out, "results.json"))
	return nil
}

// MachineInfo is what the figures were measured on.
type MachineInfo struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryMB  int64  `json:"memoryMB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	LoadAvg   string `json:"loadAvgAtStart"`
	InotifyMx string `json:"inotifyMaxUserInstances"`
}

func machineInfo() MachineInfo {
	m := MachineInfo{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					m.MemoryMB = kb >> 10
				}
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	m.LoadAvg = loadAvg()
	if data, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances"); err == nil {
		m.InotifyMx = strings.TrimSpace(string(data))
	}
	return m
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// goBench runs the Go benchmarks of the per-event hot paths on one core:
// parse and reduce (mapping), and the canonical event's map, validate and
// redact (canonical); it keeps the median events/s of each case.
func (e *env) goBench(ctx context.Context) error {
	count := "5"
	if e.quick {
		count = "1"
	}
	var err error
	if e.results.GoBench, err = e.runGoBench(ctx, "./mapping/", "BenchmarkParseReduce", count, "gobench.txt"); err != nil {
		return err
	}
	e.results.Canonical, err = e.runGoBench(ctx, "./canonical/", "BenchmarkValidateRedact", count, "gobench-canonical.txt")
	return err
}

// runGoBench runs one benchmark (and its sub-benchmarks) of pkg, keeps
// its output in the file out, and reads its events/s metric.
func (e *env) runGoBench(ctx context.Context, pkg, name, count, out string) ([]GoBenchResult, error) {
	args := []string{"test", "-run", "^$", "-bench", "^" + name + "$", "-cpu", "1", "-count", count, pkg}
	e.logf("go %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = e.root
	output, err := cmd.CombinedOutput()
	if err := os.WriteFile(filepath.Join(e.out, out), output, 0o644); err != nil {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("go test -bench %s %s: %w\n%s", name, pkg, err, output)
	}
	per := map[string][]float64{}
	var order []string
	for _, l := range strings.Split(string(output), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != name && !strings.HasPrefix(f[0], name+"/") {
			continue
		}
		sub := strings.TrimPrefix(strings.TrimPrefix(f[0], name), "/")
		if sub == "" {
			sub = name
		}
		for i := 1; i+1 < len(f); i++ {
			if f[i+1] == "events/s" {
				v, err := strconv.ParseFloat(f[i], 64)
				if err == nil {
					if _, seen := per[sub]; !seen {
						order = append(order, sub)
					}
					per[sub] = append(per[sub], v)
				}
			}
		}
	}
	var res []GoBenchResult
	for _, sub := range order {
		res = append(res, GoBenchResult{Name: sub, EventsPerSec: bench.Median(per[sub]), Runs: per[sub]})
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no %s results in:\n%s", name, output)
	}
	return res, nil
}
