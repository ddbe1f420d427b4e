// Package flowkit holds the few things the workflow wings share: the
// options of activities that more than one wing runs (waiting on another
// workflow, writing a local file until the disk clears), the queueing of a
// webhook notification, and the short text forms that summaries and
// details use (clocks, clipped lines). Anything that belongs to one
// feature lives in that feature's wing instead.
package flowkit
