package runplan

import (
	"strconv"
	"strings"
)

// Problem is one thing wrong with a run file. Task names the task (its id,
// or tasks[i] when it has no usable id) when the problem belongs to one and
// the message does not already name it.
type Problem struct {
	Task string
	Msg  string
}

func (p Problem) String() string {
	if p.Task == "" {
		return p.Msg
	}
	return "task " + p.Task + ": " + p.Msg
}

// Error is every problem Parse found, in file order, so an operator fixes
// the file in one pass.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "run: " + e.Problems[0].String()
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "  " + p.String()
	}
	return "run: " + strconv.Itoa(len(e.Problems)) + " problems:\n" + strings.Join(lines, "\n")
}

func problems(ps ...Problem) *Error { return &Error{Problems: ps} }
