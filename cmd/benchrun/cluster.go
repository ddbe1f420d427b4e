package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"karvi-edda-temporal/testkit/devenv"
)

// clusterOptions point benchrun at the PostgreSQL-backed Temporal server of
// `make cluster` instead of dev servers it starts itself (-cluster).
type clusterOptions struct {
	addr string
	dir  string // scripts/cluster.sh's state: server.pid, pg/data/postmaster.pid
}

// startCluster uses the running cluster, in a namespace of this run's own
// for each group (so one group's workflows do not weigh on the next, as
// with a dev server per group), and finds the pids whose CPU the report
// counts: the Temporal server's and PostgreSQL's.
func (e *env) startCluster(ctx context.Context, tuned bool) (stop func(), err error) {
	if tuned {
		e.logf("-cluster: the tuned group runs on the cluster's own dynamic config (tools/cluster/dynamicconfig.yaml)")
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	e.clusterGroups++
	ns := fmt.Sprintf("karvi-bench-%s-%d", time.Now().UTC().Format("20060102-150405"), e.clusterGroups)
	s, err := devenv.ExternalServer(sctx, e.cluster.addr, ns)
	if err != nil {
		return nil, fmt.Errorf("-cluster: %w (is `make cluster` running?)", err)
	}
	if e.serverPID, err = readPID(filepath.Join(e.cluster.dir, "server.pid")); err != nil {
		return nil, fmt.Errorf("-cluster: the Temporal server's pid: %w", err)
	}
	if e.dbPID, err = readPID(filepath.Join(e.cluster.dir, "pg", "data", "postmaster.pid")); err != nil {
		return nil, fmt.Errorf("-cluster: PostgreSQL's pid: %w", err)
	}
	e.serverAddr, e.namespace = s.Addr, ns
	if e.cl, err = s.Client(); err != nil {
		return nil, err
	}
	e.serverTuned = false
	e.logf("cluster on %s, namespace %s (server pid %d, PostgreSQL pid %d)", s.Addr, ns, e.serverPID, e.dbPID)
	return func() { e.cl.Close() }, nil
}

// readPID reads the first line of a pid file.
func readPID(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return pid, nil
}

// treeCPU is the CPU time of a process and of its children, the live ones
// and the reaped ones (PostgreSQL runs a process per connection).
func treeCPU(root int) time.Duration {
	if root == 0 {
		return 0
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 15 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		fields := f[11:13] // utime, stime
		switch {
		case pid == root:
			fields = f[11:15] // and its reaped children's
		case ppid == root:
		default:
			continue
		}
		for _, s := range fields {
			n, _ := strconv.ParseInt(s, 10, 64)
			total += time.Duration(n) * time.Second / 100
		}
	}
	return total
}

// parseLevels reads -capacity-levels.
func parseLevels(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-capacity-levels: %q is not a positive number of tasks", f)
		}
		out = append(out, n)
	}
	return out, nil
}
