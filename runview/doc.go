// Package runview draws a run for a person who keeps it open in a
// terminal: a header, a progress bar, a table of the tasks, the dependency
// graph, warnings, what blocks the run with the commands that unblock it,
// and the summary once the run has ended.
//
// It is pure: it draws a View as the run workflow answers it, at the
// time and with the colours the caller gives, so the same view always
// draws the same text. Big runs stay a few screens long: the table, the
// graph and every list are cut to a bound and say how much they left out.
package runview
