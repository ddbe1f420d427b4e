package taskact

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/internal/proc"
	"karvi-edda-temporal/mapping/redact"
)

// ConductorHandle names one conductor run: its supervisor process (leader of
// the run's session and process group) and the files it records. It is the
// workflow's own record of the run, converted to and from the process
// package's handle, so that package may change without touching history.
type ConductorHandle struct {
	PID  int `json:"pid"`
	PGID int `json:"pgid"`
	// StartTime is the supervisor's start time in clock ticks since boot:
	// with PID it names one process lifetime, defeating pid reuse.
	StartTime uint64 `json:"startTime"`
	StartedAt string `json:"startedAt"`
	// LogPath is the conductor's standard output, StderrPath its standard
	// error; runs recorded before they were apart have no StderrPath.
	LogPath    string `json:"logPath"`
	StderrPath string `json:"stderrPath,omitempty"`
	ExitPath   string `json:"exitPath"`
	Token      string `json:"token"`
}

func handleOf(h proc.Handle) ConductorHandle { return ConductorHandle(h) }

func (h ConductorHandle) proc() proc.Handle { return proc.Handle(h) }

// StartRequest starts (or re-attaches to) the conductor for one plan.
type StartRequest struct {
	Plan PlanInfo `json:"plan"`
}

// StartConductor spawns the conductor detached, in its own process group, or
// re-attaches to the run already recorded for this plan: a retried or
// replayed start never launches a second conductor for the same attempt.
func (a *Activities) StartConductor(ctx context.Context, req StartRequest) (ConductorHandle, error) {
	bin, err := exec.LookPath(a.Config.Conductor)
	if err != nil {
		return ConductorHandle{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("conductor %q not found: %v", a.Config.Conductor, err), ErrConductorStart, err)
	}
	h, attached, err := proc.Start(proc.Spec{
		Dir:     req.Plan.RunDir,
		Cwd:     req.Plan.Cwd,
		Command: conductorRun(bin, req.Plan),
		Env:     conductorEnv(a.Config.ConductorEnv),
	})
	if err != nil {
		return ConductorHandle{}, fmt.Errorf("start conductor for %s: %w", req.Plan.Summary.Name, err)
	}
	activity.GetLogger(ctx).Info("conductor running", "plan", req.Plan.Summary.Name,
		"pid", h.PID, "attached", attached)
	return handleOf(h), nil
}

// conductorArgs is edda's command line for `conduct <args>`: every
// conductor command line of the package is built here, so the first start,
// a resume after a pause, an abort and a retry cannot come to disagree on
// how edda is called.
func conductorArgs(bin string, args ...string) []string {
	return append([]string{bin, "conduct"}, args...)
}

// conductorRun is the command line that runs plan: its events as JSON on
// standard output, its working directory the task's.
func conductorRun(bin string, plan PlanInfo) []string {
	return conductorArgs(bin, "run", plan.PlanPath, "--cwd", plan.Cwd, "--json")
}

// conductorCommand is a short conductor command about plan (abort, retry),
// run in the plan's working directory with the conductor's environment.
func (a *Activities) conductorCommand(ctx context.Context, bin string, plan PlanInfo, args ...string) *exec.Cmd {
	argv := conductorArgs(bin, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = plan.Cwd
	cmd.Env = conductorEnv(a.Config.ConductorEnv)
	return cmd
}

// AbortRequest stops a conductor run: `conduct abort` then the process group.
type AbortRequest struct {
	Plan   PlanInfo        `json:"plan"`
	Handle ConductorHandle `json:"handle"`
	// Stream carries the workflow's steps (the signal that asked for the
	// stop), stored before the conductor is stopped.
	Stream *StreamInfo `json:"stream,omitempty"`
}

// AbortConductor stops the conductor's whole process group (TERM, then KILL
// after the grace period) and then marks the plan aborted with `conduct
// abort`, so that a later `conduct run` of the same plan exits at once. The
// order matters: a running edda never re-reads state.json and its next save
// would undo an abort written while it still runs.
func (a *Activities) AbortConductor(ctx context.Context, req AbortRequest) error {
	stopBeat := activities.Heartbeat(ctx, activities.HeartbeatEvery)
	defer stopBeat()
	logger := activity.GetLogger(ctx)
	if _, err := a.appendSteps(ctx, req.Stream); err != nil {
		return fmt.Errorf("store the workflow's events: %w", err)
	}

	grace := a.Config.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	if err := proc.Stop(ctx, req.Handle.proc(), grace); err != nil {
		return fmt.Errorf("stop conductor group %d of %s: %w", req.Handle.PGID, req.Plan.Summary.Name, err)
	}
	logger.Info("conductor stopped", "plan", req.Plan.Summary.Name, "pgid", req.Handle.PGID)

	if bin, err := exec.LookPath(a.Config.Conductor); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := a.conductorCommand(cctx, bin, req.Plan, "abort", req.Plan.Summary.Name)
		if out, err := cmd.CombinedOutput(); err != nil {
			// Best effort: the plan may have no state yet, or be finished;
			// the process group is already gone either way.
			logger.Warn("conduct abort failed", "plan", req.Plan.Summary.Name,
				"error", err, "output", shorten(redact.String(string(out))))
		}
	}
	return nil
}

// sweepLeftovers ends what a gone conductor left running in its process
// group: edda kills only its direct child on a phase timeout and nothing
// when it dies itself, so an agent (or the agent's children) may outlive
// it. It returns a sentence for the brief when something was swept, ""
// otherwise; a sweep that fails is logged and left to the next look.
func (a *Activities) sweepLeftovers(ctx context.Context, plan PlanInfo, h ConductorHandle) string {
	grace := a.Config.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	n, err := proc.Sweep(ctx, h.proc(), grace)
	if err != nil {
		activities.Logger(ctx).Warn("processes the conductor left could not be swept",
			"plan", plan.Summary.Name, "pgid", h.PGID, "error", err)
	}
	if n == 0 {
		return ""
	}
	msg := fmt.Sprintf("the conductor of %s left %d process(es) running in its process group %d; stopped them",
		plan.Summary.Name, n, h.PGID)
	activities.Logger(ctx).Warn("swept what the conductor left", "plan", plan.Summary.Name,
		"pgid", h.PGID, "processes", n)
	return msg
}

// conductorEnv is the worker's environment without anything the worker
// reads for itself, plus extra. Every variable named TEMPORAL_* (the
// connection settings the SDK's envconfig reads: API key, mTLS key and
// certificate, gRPC headers, codec auth, profile file) and KARVI_* (the
// karvi tokens, the payload codec keys current and old, the worker's own
// settings) is dropped: the conductor and its agents need none of them, and
// an agent that could read them could reach every workflow in the namespace
// or decrypt its payloads. A deny rule by prefix rather than a list of
// names keeps a variable added later out too. What the agents do need
// (PATH, HOME, their model keys) passes; extra is appended as given.
func conductorEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !workerOnlyEnv(name) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// note adds a line of the bridge's own to the brief's log and sends it.
func (d *delivery) note(ctx context.Context, action, detail string) error {
	c := d.brief.Note(time.Now().UTC().Format(time.RFC3339), action, detail)
	return d.patch(ctx, d.enc.Patch(&d.brief, c))
}

// workerOnlyEnv reports a variable the conductor must not inherit.
func workerOnlyEnv(name string) bool {
	return strings.HasPrefix(name, "TEMPORAL_") || strings.HasPrefix(name, "KARVI_")
}
