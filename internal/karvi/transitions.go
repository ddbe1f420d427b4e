package karvi

// Statuses is karvi's list of valid task statuses, in its order.
var Statuses = []string{
	"pending", "dispatched", "in_progress", "blocked", "completed",
	"reviewing", "approved", "needs_revision", "cancelled",
}

// Transitions is karvi's legal task status transition table
// (management.js ALLOWED_TASK_TRANSITIONS). A status moving to itself is
// never legal. It must match karvi's exactly: change it only when karvi's
// changes.
var Transitions = map[string][]string{
	"pending":        {"dispatched", "cancelled"},
	"dispatched":     {"in_progress", "pending", "cancelled"},
	"in_progress":    {"blocked", "completed", "dispatched", "cancelled"},
	"blocked":        {"in_progress", "dispatched", "cancelled"},
	"completed":      {"reviewing", "approved", "needs_revision"},
	"reviewing":      {"approved", "needs_revision"},
	"needs_revision": {"in_progress", "approved"},
	"approved":       {},
	"cancelled":      {},
}

// ValidStatus reports whether karvi accepts s as a task status.
func ValidStatus(s string) bool {
	for _, v := range Statuses {
		if v == s {
			return true
		}
	}
	return false
}

// CanTransition reports whether karvi allows from -> to. An empty from is
// "pending", as in karvi.
func CanTransition(from, to string) bool {
	if from == "" {
		from = "pending"
	}
	if from == to {
		return false
	}
	for _, s := range Transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// walkable are the statuses a planned path may pass through on its way to a
// target. Review states are excluded: passing through them would start
// karvi's review machinery, which is not a step on the way anywhere.
var walkable = map[string]bool{
	"pending": true, "dispatched": true, "in_progress": true, "blocked": true,
}

// PathTo returns the shortest sequence of statuses to POST, one after the
// other, to move a task from from to to through legal transitions, passing
// only through pending, dispatched, in_progress and blocked. It returns an
// empty path when from == to, and an *Error of KindIllegalTransition (with
// karvi's wording for from -> to) when no such path exists.
//
// One exception: a redispatch (to dispatched) of a task that is completed
// or under review passes through needs_revision, which is what karvi itself
// records when a finished task must be done again; without it karvi has no
// way back from completed, and a redispatch could never run.
//
// For example dispatched -> completed is [in_progress completed],
// blocked -> dispatched (a redispatch) is [dispatched], and
// completed -> dispatched is [needs_revision in_progress dispatched].
func PathTo(from, to string) ([]string, error) {
	if from == "" {
		from = "pending"
	}
	if from == to {
		return nil, nil
	}
	if !ValidStatus(from) || !ValidStatus(to) {
		return nil, IllegalTransitionError("plan status path", from, to)
	}
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range Transitions[cur] {
			if _, seen := prev[next]; seen {
				continue
			}
			prev[next] = cur
			if next == to {
				var path []string
				for s := to; s != from; s = prev[s] {
					path = append([]string{s}, path...)
				}
				return path, nil
			}
			if walkable[next] || (to == "dispatched" && next == "needs_revision") {
				queue = append(queue, next)
			}
		}
	}
	return nil, IllegalTransitionError("plan status path", from, to)
}
