package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"karvi-edda-temporal/mapping"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/soak"
)

// ReadPlans reads a task's attempts from the work roots: each run
// directory runs/<task>/<dir> is a run of the attempt whose plan is dir
// without "-resume-N", and the attempt's events.jsonl and state.json are
// in its conductor's state directory, <cwd>/.edda/conductor/<plan>/. The
// cwd is cwds[plan] when known (the job view's worktree_path), else the
// task's default directory, <root>/tasks/<task>, of the first root that
// has the files.
func ReadPlans(roots []Root, task string, cwds map[string]string) ([]soak.PlanObs, error) {
	dirs := map[string][]string{}
	for _, r := range roots {
		ents, err := os.ReadDir(filepath.Join(r.Dir, "runs", task))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list runs of task %s: %w", task, err)
		}
		for _, e := range ents {
			if e.IsDir() {
				plan := soak.AttemptPlan(e.Name())
				dirs[plan] = append(dirs[plan], e.Name())
			}
		}
	}
	plans := make([]string, 0, len(dirs))
	for p := range dirs {
		plans = append(plans, p)
	}
	sort.Strings(plans)
	out := make([]soak.PlanObs, 0, len(plans))
	for _, plan := range plans {
		runDirs := dirs[plan]
		sort.Slice(runDirs, func(i, j int) bool { return soak.ResumeNumber(runDirs[i]) < soak.ResumeNumber(runDirs[j]) })
		po := soak.PlanObs{Name: plan, RunDirs: compactStrings(runDirs)}
		var cands []string
		if c := cwds[plan]; c != "" {
			cands = append(cands, filepath.Join(c, ".edda", "conductor", plan))
		}
		for _, r := range roots {
			cands = append(cands, filepath.Join(r.Dir, "tasks", task, ".edda", "conductor", plan))
		}
		for _, dir := range cands {
			found, err := readConductorFiles(dir, &po)
			if err != nil {
				return nil, fmt.Errorf("task %s plan %s: %w", task, plan, err)
			}
			if found {
				break
			}
		}
		out = append(out, po)
	}
	return out, nil
}

// readConductorFiles fills po from a conductor state directory; found is
// false when the directory has neither file.
func readConductorFiles(dir string, po *soak.PlanObs) (found bool, err error) {
	events := filepath.Join(dir, "events.jsonl")
	if _, err := os.Stat(events); err == nil {
		found = true
		if err := readJSONL(events, func(n int, line []byte, last bool) error {
			ev, err := mapping.ParseEvent(line)
			if err != nil {
				if !last {
					po.Malformed++
				}
				// A torn last line is one the tail has not read either.
				return nil
			}
			po.Events = append(po.Events, soak.Event{Line: n, Type: ev.Type, Phase: ev.PhaseID, Time: ev.TS, CostUSD: ev.CostUSD})
			return nil
		}); err != nil {
			return found, err
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return found, nil
	}
	if err != nil {
		return true, fmt.Errorf("read state.json: %w", err)
	}
	var st struct {
		PlanStatus   string   `json:"plan_status"`
		TotalCostUSD *float64 `json:"total_cost_usd"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return true, fmt.Errorf("%s: %w", filepath.Join(dir, "state.json"), err)
	}
	po.State = &soak.PlanState{Status: st.PlanStatus}
	if st.TotalCostUSD != nil {
		po.State.TotalCostUSD = *st.TotalCostUSD
	}
	return true, nil
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// briefDoc is the part of a brief ParseBrief reads. Keys a new attempt
// reset are null in karvi's merge, hence the pointers.
type briefDoc struct {
	Plan struct {
		Name *string `json:"name"`
	} `json:"plan"`
	Phases map[string]*struct {
		Status *string `json:"status"`
	} `json:"phases"`
	Cost struct {
		TotalUSD *float64            `json:"total_usd"`
		ByPhase  map[string]*float64 `json:"by_phase"`
	} `json:"cost"`
	Log []soak.LogEntry `json:"log"`
}

// ParseBrief reads a brief document (JSON). nil data is no brief.
func ParseBrief(data []byte) (*soak.Brief, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var d briefDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("brief: %w", err)
	}
	b := &soak.Brief{TotalUSD: d.Cost.TotalUSD, Log: d.Log}
	if d.Plan.Name != nil {
		b.PlanName = *d.Plan.Name
	}
	for id, p := range d.Phases {
		if p != nil && p.Status != nil {
			if b.Phases == nil {
				b.Phases = map[string]string{}
			}
			b.Phases[id] = *p.Status
		}
	}
	for id, v := range d.Cost.ByPhase {
		if v != nil {
			if b.ByPhase == nil {
				b.ByPhase = map[string]float64{}
			}
			b.ByPhase[id] = *v
		}
	}
	return b, nil
}

// BriefOf is ParseBrief of a brief held as a decoded object (the karvi
// fake's Brief).
func BriefOf(m map[string]any) (*soak.Brief, error) {
	if m == nil {
		return nil, nil
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("brief: %w", err)
	}
	return ParseBrief(data)
}

// ReadRunStatus reads a run's status.json from the work roots
// (<root>/prds/<slug>/status.json; of several, the newest) and returns its
// task entries by task id. A run without one has none.
func ReadRunStatus(roots []Root, slug string) (map[string]*soak.RunTaskStatus, error) {
	var newest string
	var mod int64
	for _, r := range roots {
		p := filepath.Join(r.Dir, "prds", slug, "status.json")
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if t := fi.ModTime().UnixNano(); newest == "" || t > mod {
			newest, mod = p, t
		}
	}
	if newest == "" {
		return nil, nil
	}
	data, err := os.ReadFile(newest)
	if err != nil {
		return nil, fmt.Errorf("read run status: %w", err)
	}
	var st runstatus.Status
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", newest, err)
	}
	out := make(map[string]*soak.RunTaskStatus, len(st.Tasks))
	for id, t := range st.Tasks {
		if t != nil {
			out[id] = &soak.RunTaskStatus{Status: string(t.Status), Error: t.Error}
		}
	}
	return out, nil
}
