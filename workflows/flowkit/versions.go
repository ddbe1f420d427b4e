// Code in this package that changes what a workflow records is versioned
// with workflow.GetVersion, and every change id it asks for is listed here,
// once, with what it guards and since when: histories recorded before a
// change replay on the path they took, so an id is never renamed, reused
// or dropped while a workflow that recorded it may still be open. A new
// change adds a constant here (workflows.TestGetVersionUsesListedChangeIDs
// fails on a GetVersion call whose id is not listed). CONTRIBUTING.md says
// how to add one.

package flowkit

// The change ids of every workflow that notifies (flowkit is shared), oldest first.
const (
	// versionNotifyEnds names the change that sends the blocked, host_lost and
	// run_ended notifications. Histories recorded before it replay without
	// them.
	// Live since 2026-11-25; asked in notify.go.
	versionNotifyEnds = "notify-ends"
)
