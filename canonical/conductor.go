package canonical

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"karvi-edda-temporal/mapping"
)

// ConductorAgent is the agent id of the conductor itself: plan-level events
// are its own, and it is the parent of every phase agent.
const ConductorAgent = "conductor"

// Context is what FromConductor needs beyond the event: plain values, so
// the mapping is a function of its inputs and nothing else.
type Context struct {
	// RunID names the run; "run-" is added when missing and characters an id
	// cannot hold become '-'. Empty falls back to Plan, then to "run-unknown".
	RunID string
	// TaskID is the board's task id ("T5" gives "task-T5"); empty leaves
	// task_id out.
	TaskID string
	// Plan is the plan name, giving intent_ref "plan-<name>". Only plan_start
	// carries the name, so the caller passes it for every other event.
	Plan string
	// Parent is the conductor's own parent agent (who dispatched the run);
	// empty leaves it out.
	Parent string
	// File is the path of the events file, for raw_ref.
	File string
	// TS stands in when the event has no ts of its own.
	TS string
	// MaxAttempts is each phase's attempt budget, DefaultMaxAttempts the
	// budget of a phase not listed; a failure at or past the budget is final.
	// With neither known a failure is never taken as final.
	MaxAttempts        map[string]int
	DefaultMaxAttempts int
	// Attempt is which attempt of the task the run is; 0 and 1 are the
	// first. The agents of a later attempt are new agents, named with the
	// plan name's "-rN" (conductor-r2, test-r2), so a phase that failed in
	// attempt 1 and runs again in attempt 2 is not one agent going from
	// failed back to running, a change no state table allows.
	Attempt int
}

// AgentFor is the id of agent base in the given attempt: base itself for
// the first, base + "-rN" for attempt N > 1, cut so the id stays within 64
// bytes.
func AgentFor(base string, attempt int) string {
	if attempt <= 1 {
		return sanitize(base, 64)
	}
	suffix := "-r" + strconv.Itoa(attempt)
	return sanitize(base, 64-len(suffix)) + suffix
}

// phaseRoles gives the role of the phase ids a plan conventionally uses.
var phaseRoles = map[string]Role{
	"implement": RoleExecutor,
	"test":      RoleTester,
	"docs":      RoleWriter,
	"review":    RoleReviewer,
}

// agentRoles gives the role of the named agents of the agent catalogue;
// analysis and planning roles fold into planner, build and git work into
// executor, research into explorer, security review into guard.
var agentRoles = map[string]Role{
	"planner": RolePlanner, "analyst": RolePlanner, "product-manager": RolePlanner,
	"product-analyst": RolePlanner, "ux-researcher": RolePlanner, "information-architect": RolePlanner,
	"executor": RoleExecutor, "deep-executor": RoleExecutor, "build-fixer": RoleExecutor, "git-master": RoleExecutor,
	"explore": RoleExplorer, "scientist": RoleExplorer, "dependency-expert": RoleExplorer,
	"architect":     RoleArchitect,
	"debugger":      RoleDebugger,
	"verifier":      RoleVerifier,
	"designer":      RoleDesigner,
	"code-reviewer": RoleReviewer, "style-reviewer": RoleReviewer, "quality-reviewer": RoleReviewer,
	"api-reviewer": RoleReviewer, "performance-reviewer": RoleReviewer, "critic": RoleReviewer,
	"security-reviewer": RoleGuard,
	"test-engineer":     RoleTester, "qa-tester": RoleTester,
	"writer": RoleWriter,
}

// RoleFor maps a phase id or agent name to a role, ignoring case. The
// second result is false for a name in neither table; the role is then
// custom.
func RoleFor(name string) (Role, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	if r, ok := phaseRoles[n]; ok {
		return r, true
	}
	if r, ok := agentRoles[n]; ok {
		return r, true
	}
	return RoleCustom, false
}

// FromConductor maps one conductor event to a canonical event. The
// conductor is agent "conductor" (role planner); each phase is an agent of
// its own named after the phase, child of the conductor. The result is not
// yet validated or redacted. The warnings say where the mapping had to
// guess (a phase with no known role).
//
// State and type are kept apart: a phase whose check failed with attempts
// left is still running and reports a verify with result fail; the failure
// that uses up the last attempt is state failed, type error; any other
// failure with attempts left (the agent itself failed) is state error.
func FromConductor(ev mapping.Event, ctx Context) (Event, []Warning) {
	out := Event{
		TS:        ev.TS,
		RunID:     runID(ctx),
		Provider:  ProviderSystem,
		Mode:      ModePipeline,
		AgentID:   AgentFor(ConductorAgent, ctx.Attempt),
		Role:      RolePlanner,
		TaskID:    prefixed("task-", ctx.TaskID),
		IntentRef: prefixed("plan-", firstNonEmpty(ctx.Plan, ev.PlanName)),
		RawRef:    rawRef(ctx.File, ev.Pos),
	}
	if out.TS == "" {
		out.TS = ctx.TS
	}
	if ctx.Parent != "" {
		out.ParentAgentID = sanitize(ctx.Parent, 64)
	}
	var warns []Warning
	phase := ev.PhaseID != ""
	if phase {
		out.AgentID = AgentFor(ev.PhaseID, ctx.Attempt)
		out.ParentAgentID = AgentFor(ConductorAgent, ctx.Attempt)
		role, ok := RoleFor(ev.PhaseID)
		if !ok {
			warns = append(warns, Warning{WarnRole, "role",
				fmt.Sprintf("phase %q has no known role; using %q", clip(ev.PhaseID), RoleCustom)})
		}
		out.Role = role
	}

	var payload any
	if project := conductorProjections[ev.Type]; project != nil {
		payload = project(ev, ctx, &out)
	} else {
		// A type this version does not know: passed on as a message from
		// an agent assumed still at work, so a reader sees it and no state
		// is invented.
		out.State, out.Type = StateRunning, TypeMessage
		payload = message{Message: firstNonEmpty(ev.Error, ev.Reason, ev.Type), SourceType: ev.Type}
	}
	// The payload types hold only strings and ints, which always encode.
	out.Payload, _ = json.Marshal(payload)
	out.Metrics = metrics(ev)
	return out, warns
}

// conductorProjections says how each of mapping.EventTypes becomes a
// canonical event: each sets out's state and type and returns the payload.
var conductorProjections = map[string]func(ev mapping.Event, ctx Context, out *Event) any{
	mapping.EventPlanStart: func(ev mapping.Event, _ Context, out *Event) any {
		out.State, out.Type = StateRunning, TypeStateChange
		return stateChange{From: StateIdle, To: StateRunning, Trigger: ev.Type, PlanName: ev.PlanName, PhaseCount: ev.PhaseCount}
	},
	mapping.EventPhaseStart: func(ev mapping.Event, ctx Context, out *Event) any {
		out.State = StateRunning
		if ev.Attempt > 1 {
			// Another attempt after a failure: the fix half of a
			// verify-fix loop.
			out.Type = TypeFix
			return fix{Target: ev.PhaseID, Strategy: retryStrategy(ev.Attempt, maxAttempts(ctx, ev.PhaseID)), Attempt: ev.Attempt}
		}
		out.Type = TypeStateChange
		return stateChange{From: StateIdle, To: StateRunning, Trigger: ev.Type, Attempt: ev.Attempt}
	},
	mapping.EventPhasePassed: func(ev mapping.Event, _ Context, out *Event) any {
		out.State, out.Type = StateDone, TypeTaskDone
		return taskDone{Result: "success", Summary: fmt.Sprintf("phase %s passed", ev.PhaseID), Attempt: ev.Attempt}
	},
	mapping.EventPhaseFailed: phaseFailed,
	mapping.EventPhaseSkipped: func(ev mapping.Event, _ Context, out *Event) any {
		// Never started: idle to cancelled is the one way out of idle
		// that is not work.
		out.State, out.Type = StateCancelled, TypeTaskDone
		return taskDone{Result: "cancelled", Summary: firstNonEmpty(ev.Reason, "phase skipped")}
	},
	mapping.EventPlanCompleted: func(ev mapping.Event, _ Context, out *Event) any {
		out.State, out.Type = StateDone, TypeTaskDone
		return taskDone{Result: "success", Summary: fmt.Sprintf("%d phases passed", ev.PhasesPassed)}
	},
	mapping.EventPlanAborted: func(ev mapping.Event, _ Context, out *Event) any {
		out.State, out.Type = StateFailed, TypeError
		return errorPayload{ErrorType: firstNonEmpty(ev.ErrorType, "plan_aborted"),
			Message:      firstNonEmpty(ev.Reason, ev.Error, "plan aborted"),
			PhasesPassed: ev.PhasesPassed, PhasesPending: ev.PhasesPending}
	},
}

// phaseFailed: the failure that uses up the phase's last attempt is state
// failed; a failed check with attempts left is a verify that failed; any
// other failure with attempts left is state error.
func phaseFailed(ev mapping.Event, ctx Context, out *Event) any {
	max := maxAttempts(ctx, ev.PhaseID)
	switch {
	case max > 0 && ev.Attempt >= max:
		out.State, out.Type = StateFailed, TypeError
		return errorPayload{ErrorType: firstNonEmpty(ev.ErrorType, "max_retry_exceeded"),
			Message: firstNonEmpty(ev.Error, ev.Reason, "phase failed"), Attempt: ev.Attempt}
	case checkFailure(ev):
		out.State, out.Type = StateRunning, TypeVerify
		return verify{Result: "fail", Reason: firstNonEmpty(ev.Error, ev.Reason), Attempt: ev.Attempt}
	default:
		out.State, out.Type = StateError, TypeError
		return errorPayload{ErrorType: firstNonEmpty(ev.ErrorType, "phase_failed"),
			Message: firstNonEmpty(ev.Error, ev.Reason, "phase failed"), Attempt: ev.Attempt}
	}
}

// Payloads, one per type, with the conductor's attempt as an extra member.
type (
	stateChange struct {
		From       State  `json:"from"`
		To         State  `json:"to"`
		Trigger    string `json:"trigger,omitempty"`
		Attempt    int    `json:"attempt,omitempty"`
		PlanName   string `json:"plan_name,omitempty"`
		PhaseCount int    `json:"phase_count,omitempty"`
	}
	fix struct {
		Target   string `json:"target"`
		Strategy string `json:"strategy"`
		Attempt  int    `json:"attempt,omitempty"`
	}
	taskDone struct {
		Result  string `json:"result"`
		Summary string `json:"summary,omitempty"`
		Attempt int    `json:"attempt,omitempty"`
	}
	verify struct {
		Result  string `json:"result"`
		Reason  string `json:"reason,omitempty"`
		Attempt int    `json:"attempt,omitempty"`
	}
	errorPayload struct {
		ErrorType     string `json:"error_type"`
		Message       string `json:"message"`
		Attempt       int    `json:"attempt,omitempty"`
		PhasesPassed  int    `json:"phases_passed,omitempty"`
		PhasesPending int    `json:"phases_pending,omitempty"`
	}
	message struct {
		Message    string `json:"message"`
		SourceType string `json:"source_type"`
	}
)

// checkFailure reports a failure of the phase's checks rather than of the
// agent: the conductor words it "check failed: …" or types it as a check.
func checkFailure(ev mapping.Event) bool {
	return strings.HasPrefix(ev.Error, "check failed") || strings.HasPrefix(ev.ErrorType, "check")
}

func maxAttempts(ctx Context, phase string) int {
	if n, ok := ctx.MaxAttempts[phase]; ok {
		return n
	}
	return ctx.DefaultMaxAttempts
}

func retryStrategy(attempt, max int) string {
	if max > 0 {
		return fmt.Sprintf("retry, attempt %d of %d", attempt, max)
	}
	return fmt.Sprintf("retry, attempt %d", attempt)
}

func metrics(ev mapping.Event) *Metrics {
	var m Metrics
	if ev.DurationMS > 0 {
		l := float64(ev.DurationMS)
		m.LatencyMS = &l
	}
	cost := ev.CostUSD
	if cost == nil {
		cost = ev.TotalCostUSD
	}
	if cost != nil && *cost >= 0 {
		c := *cost
		m.CostUSD = &c
	}
	if m.LatencyMS == nil && m.CostUSD == nil {
		return nil
	}
	return &m
}

func runID(ctx Context) string {
	id := firstNonEmpty(ctx.RunID, ctx.Plan)
	if id == "" {
		return "run-unknown"
	}
	return prefixed("run-", id)
}

// prefixed makes prefix + s a valid id, s sanitised; empty s stays empty.
func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	s = strings.TrimPrefix(s, prefix)
	return prefix + sanitize(s, 256)
}

// sanitize replaces every byte an id cannot hold with '-' and cuts to n.
func sanitize(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	if s == "" {
		return "-"
	}
	b := []byte(s)
	for i, c := range b {
		if !idByte(c) {
			b[i] = '-'
		}
	}
	return string(b)
}

// rawRef points at the source line: the events file and the byte offset
// where the line starts, plus the file's generation once it has been
// replaced.
func rawRef(file string, pos mapping.Position) string {
	frag := "offset=" + strconv.FormatInt(pos.Offset, 10)
	if pos.Gen != 0 {
		frag = "gen=" + strconv.Itoa(pos.Gen) + "&" + frag
	}
	if file == "" {
		file = "events.jsonl"
	}
	// An absolute path gives file:///path, a relative one file:path.
	p := (&url.URL{Path: file}).EscapedPath()
	if strings.HasPrefix(p, "/") {
		p = "//" + p
	}
	return "file:" + p + "#" + frag
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
