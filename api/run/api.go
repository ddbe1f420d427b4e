package runapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/costs"
	"karvi-edda-temporal/runstatus"
	"karvi-edda-temporal/runview"
)

// Names a client uses to talk to a run workflow. They are part of the public
// interface (the temporal CLI uses them too), so they never change.
const (
	RunWorkflowName = "RunWorkflow"

	// Updates: each answers with an error when the request does not apply
	// (an unknown task, a task that is running, a run that has ended).
	UpdatePause  = "pause"
	UpdateResume = "resume"
	UpdateSkip   = "skip"
	UpdateRetry  = "retry"
	UpdateAbort  = "abort"
	// UpdateBudget sets the run's budget (BudgetRequest): a run paused for
	// its budget starts tasks again once the new one is not spent.
	UpdateBudget = "budget"

	// QueryHandover answers with the RunInput the run would continue-as-new
	// with: what a client needs to reopen an ended run.
	QueryHandover = "handover"

	// QueryCost answers with a Cost.
	QueryCost = "cost"
	// QueryStatus answers with the run's status.json document.
	QueryStatus = "status"
	// QueryView answers with a View: the document plus what a person
	// watching the run wants beside it. Its optional argument is a
	// ViewPage; FetchView asks page by page.
	QueryView = "view"
)

// WorkflowID is the one workflow id per run.
func WorkflowID(slug string) string { return "karvi-run-" + slug }

// TaskWorkflowID is the workflow id of a run's task: the task workflow's
// own, because a run's task is a karvi task like any other (one workflow per
// task, and `starter status <task>` finds it). Task ids are karvi's, unique
// on the board; two runs that name the same task share it.
func TaskWorkflowID(taskID string) string { return taskapi.WorkflowID(taskID) }

// RunInput starts a run workflow.
type RunInput struct {
	// Run is the run file as written (karvi's project shape, KARIMO's task
	// fields accepted). The workflow parses and validates it, so what
	// history records is what the caller gave.
	Run json.RawMessage `json:"run"`
	// Repo is a git repository (a path the worker resolves inside its work
	// root) in which every task works on a worktree of its own; empty for a
	// run without one.
	Repo string `json:"repo,omitempty"`
	// FeatureBranch is the branch the tasks' branches merge into; default
	// feature/<slug>.
	FeatureBranch string `json:"featureBranch,omitempty"`
	// TaskQueue is where the tasks' workflows run; default the run's own.
	TaskQueue string `json:"taskQueue,omitempty"`
	// Tuning is handed to every task workflow.
	Tuning *taskapi.Tuning `json:"tuning,omitempty"`
	// Pool, when set, names the agent slot pool every task's conductor
	// waits for (counted against the pool's max_total as this run); the
	// tasks wait in line as long as it takes.
	Pool string `json:"pool,omitempty"`
	// ContinueAsNewAfter continues-as-new after this many task workflows
	// were started in one run, besides Temporal's own suggestion (0: only
	// the suggestion). Tests use it to exercise the hand-over with tasks
	// running.
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
	// Budget limits what the run's tasks may spend together; nil for none.
	Budget *costs.Budget `json:"budget,omitempty"`
	// Reopen, with Resume from a closed run's handover query, starts the
	// run again from where it ended and applies this request first (a retry
	// or skip of a task that kept it from completing).
	Reopen *Reopen `json:"reopen,omitempty"`
	// Resume is the workflow's state handed over by continue-as-new; a
	// client never sets it but to reopen.
	Resume json.RawMessage `json:"resume,omitempty"`
	// Packed holds Run and Resume gzipped (Pack), as the workflow hands
	// them over: a run of thousands of tasks would otherwise near
	// Temporal's 2 MB payload limit. Unpack restores them.
	Packed []byte `json:"packed,omitempty"`
}

// packed is what Packed holds, before gzip.
type packed struct {
	Run    json.RawMessage `json:"run"`
	Resume json.RawMessage `json:"resume,omitempty"`
}

// Pack moves Run and Resume into Packed, gzipped.
func (in RunInput) Pack() (RunInput, error) {
	data, err := json.Marshal(packed{Run: in.Run, Resume: in.Resume})
	if err != nil {
		return in, fmt.Errorf("pack the run input: %w", err)
	}
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	if err != nil {
		return in, fmt.Errorf("pack the run input: %w", err)
	}
	if _, err := zw.Write(data); err != nil {
		return in, fmt.Errorf("pack the run input: %w", err)
	}
	if err := zw.Close(); err != nil {
		return in, fmt.Errorf("pack the run input: %w", err)
	}
	in.Run, in.Resume, in.Packed = nil, nil, b.Bytes()
	return in, nil
}

// Unpack restores Run and Resume from Packed; an input without Packed is
// returned as it is.
func (in RunInput) Unpack() (RunInput, error) {
	if len(in.Packed) == 0 {
		return in, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(in.Packed))
	if err != nil {
		return in, fmt.Errorf("unpack the run input: %w", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return in, fmt.Errorf("unpack the run input: %w", err)
	}
	var p packed
	if err := json.Unmarshal(data, &p); err != nil {
		return in, fmt.Errorf("unpack the run input: %w", err)
	}
	in.Run, in.Resume, in.Packed = p.Run, p.Resume, nil
	return in, nil
}

// Reopen is the request an ended run is reopened for.
type Reopen struct {
	// Update is UpdateRetry or UpdateSkip.
	Update string      `json:"update"`
	Task   TaskRequest `json:"task"`
}

// Cost answers the cost query: what the run's tasks spent, those still
// running included, and where that stands against the budget.
type Cost struct {
	// Summary adds up the attempts that ended, by phase, task, model and
	// skill; RunningUSD what the attempts under way reported so far.
	Summary    costs.Summary `json:"summary"`
	RunningUSD float64       `json:"runningUsd"`
	SpentUSD   float64       `json:"spentUsd"`
	Budget     *costs.Budget `json:"budget,omitempty"`
	// Level is under, warning or spent.
	Level string `json:"level,omitempty"`
}

// TaskRequest names one task of the run: the input of skip and retry.
type TaskRequest struct {
	Task   string `json:"task"`
	Reason string `json:"reason,omitempty"`
}

// BudgetRequest is the input of budget: the run's new limit, and its
// action (empty: keep the run's).
type BudgetRequest struct {
	LimitUSD float64      `json:"limitUsd"`
	Action   costs.Action `json:"action,omitempty"`
}

// AbortRequest is the input of abort; the reason is optional.
type AbortRequest struct {
	Reason string `json:"reason,omitempty"`
}

// View answers the view query; it, TaskView and Overlap are runview's,
// the pure package that draws them.
type (
	View     = runview.View
	TaskView = runview.TaskView
	Overlap  = runview.Overlap
)

// ViewPage asks the view query for part of a run's tasks. Without one (or
// with Max 0) the answer holds every task; the server refuses an answer
// over its blob limit (2 MB by default), which the view of a run passes at
// about 4,000 tasks.
type ViewPage struct {
	From int `json:"from,omitempty"`
	Max  int `json:"max,omitempty"`
}

// ViewPageSize is how many tasks FetchView asks for at once: an answer of
// about half a megabyte.
const ViewPageSize = 1000

// FetchView asks for a run's whole view a page at a time (ask runs the
// view query with its argument) and puts the pages together. The pages
// are read one after another, so on a run that moves each task is as its
// own page saw it; a worker whose view knows no pages answers everything
// at the first ask.
func FetchView(ask func(ViewPage) (View, error)) (View, error) {
	v, err := ask(ViewPage{Max: ViewPageSize})
	if err != nil {
		return View{}, err
	}
	for len(v.Tasks) < v.TaskCount {
		p, err := ask(ViewPage{From: len(v.Tasks), Max: ViewPageSize})
		if err != nil {
			return View{}, err
		}
		if len(p.Tasks) == 0 || p.From != len(v.Tasks) {
			return View{}, fmt.Errorf("view of run %s: the page from task %d held %d tasks from %d, of %d",
				v.Slug, len(v.Tasks), len(p.Tasks), p.From, v.TaskCount)
		}
		v.Tasks = append(v.Tasks, p.Tasks...)
		if v.Status.Tasks == nil {
			v.Status.Tasks = map[string]*runstatus.Task{}
		}
		for id, t := range p.Status.Tasks {
			v.Status.Tasks[id] = t
		}
	}
	return v, nil
}
