package observe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/proc"
)

// A conductor's group number handed to another process group after the
// conductor ended (a soak starts thousands of processes) is not the
// conductor alive again.
func TestAGroupNumberReusedByAnotherProcessIsNoLiveConductor(t *testing.T) {
	run := Run{Host: "h1", Task: "S130", Dir: "karvi-s130-r1-fe4bd479",
		Handle: proc.Handle{PID: 100, PGID: 100, StartTime: 5, Token: "tok"}}
	cases := []struct {
		name string
		ps   []proc.Process
		live bool
	}{
		{"its leader runs", []proc.Process{{PID: 100, PGID: 100, StartTime: 5}}, true},
		{"its leader gone, its agent still in the group", []proc.Process{{PID: 101, PGID: 100, StartTime: 7}}, true},
		{"another group led by a process of the same pid", []proc.Process{{PID: 100, PGID: 100, StartTime: 9}, {PID: 102, PGID: 100, StartTime: 9}}, false},
		{"nothing in the group", []proc.Process{{PID: 7, PGID: 7, StartTime: 1}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := liveConductors([]Run{run}, tc.ps)
			require.Equal(t, tc.live, len(got) == 1, "%+v", got)
		})
	}
}
