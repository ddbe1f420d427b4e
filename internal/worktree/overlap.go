package worktree

import (
	"slices"
	"strings"
)

// Overlap is a path that more than one task changed.
type Overlap struct {
	Path string `json:"path"`
	// Tasks are the tasks that changed it, sorted.
	Tasks []string `json:"tasks"`
}

// Overlaps reports the paths that more than one task touched, given each
// task's touched paths (MergeResult.Touched), sorted by path. Tasks that
// changed the same file merged cleanly or did not; either way a person
// reviewing the feature branch should look at those files first. It is
// pure and its answer does not depend on map order, so a workflow may
// call it.
//
//workflowcheck:ignore its answer is sorted
func Overlaps(touched map[string][]string) []Overlap {
	by := map[string][]string{}
	for task, paths := range touched {
		for _, p := range paths {
			if !slices.Contains(by[p], task) {
				by[p] = append(by[p], task)
			}
		}
	}
	var out []Overlap
	for p, tasks := range by {
		if len(tasks) > 1 {
			slices.Sort(tasks)
			out = append(out, Overlap{Path: p, Tasks: tasks})
		}
	}
	slices.SortFunc(out, func(a, b Overlap) int { return strings.Compare(a.Path, b.Path) })
	return out
}
