//go:build realserver

package testrig

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// LogWatch samples the brief a sink holds for some tasks, every 10 ms, and
// notes each sample whose log is shorter than the one before it (within one
// plan: a redispatch's skeleton empties the log on purpose) or shows an
// entry twice. Delivery must never move a brief backwards, nor deliver an
// event twice, whatever happens to the worker.
type LogWatch struct {
	stop, done chan struct{}
	samples    int
	grew       int
	problems   []string
}

// WatchSinkLogs watches the briefs the rig's sink holds.
func (r *Rig) WatchSinkLogs(ids ...string) *LogWatch {
	return watchLogs(ids, r.SinkBrief)
}

// SinkBrief is the brief the rig's sink holds for a task, as stored; nil
// while it has none. Unlike KarviBrief and FileBrief it never fails the
// test, so a sampler may call it.
func (r *Rig) SinkBrief(taskID string) map[string]any {
	if r.opts.Sink == "karvi" {
		return r.Karvi.Brief(taskID)
	}
	data, err := os.ReadFile(filepath.Join(r.SinkDir, taskID, "brief.json"))
	if err != nil {
		return nil
	}
	var b map[string]any
	if json.Unmarshal(data, &b) != nil {
		return map[string]any{"log": "unreadable brief.json"}
	}
	return b
}

func watchLogs(ids []string, read func(string) map[string]any) *LogWatch {
	w := &LogWatch{stop: make(chan struct{}), done: make(chan struct{})}
	type seen struct {
		plan string
		n    int
	}
	last := map[string]seen{}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, id := range ids {
				b := read(id)
				if b == nil {
					continue
				}
				w.samples++
				plan := ""
				if p, ok := b["plan"].(map[string]any); ok {
					plan, _ = p["name"].(string)
				}
				log, ok := b["log"].([]any)
				if !ok && b["log"] != nil {
					w.problems = append(w.problems, fmt.Sprintf("%s: log is %v", id, b["log"]))
					continue
				}
				prev := last[id]
				switch {
				case prev.plan == plan && len(log) < prev.n:
					w.problems = append(w.problems, fmt.Sprintf("%s (%s): log went from %d entries to %d", id, plan, prev.n, len(log)))
				case prev.plan == plan && len(log) > prev.n:
					w.grew++
				}
				last[id] = seen{plan, len(log)}
				entries := map[string]bool{}
				for _, e := range log {
					k := fmt.Sprint(e)
					if entries[k] {
						w.problems = append(w.problems, fmt.Sprintf("%s (%s): log shows %s twice", id, plan, k))
					}
					entries[k] = true
				}
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// Stop ends the watch and asserts that no sample went backwards or showed
// an entry twice; it returns the number of samples and of samples in which
// a log had grown.
func (w *LogWatch) Stop(t testing.TB) (samples, grew int) {
	t.Helper()
	close(w.stop)
	<-w.done
	require.NotZero(t, w.samples, "no brief was sampled")
	require.Empty(t, w.problems, "the sink's brief moved backwards or doubled an entry")
	return w.samples, w.grew
}
