// Code in this package that changes what a workflow records is versioned
// with workflow.GetVersion, and every change id it asks for is listed here,
// once, with what it guards and since when: histories recorded before a
// change replay on the path they took, so an id is never renamed, reused
// or dropped while a workflow that recorded it may still be open. A new
// change adds a constant here (workflows.TestGetVersionUsesListedChangeIDs
// fails on a GetVersion call whose id is not listed). CONTRIBUTING.md says
// how to add one.

package accountflow

// The change ids of AccountWorkflow, oldest first.
const (
	// versionPauseMemo names the change that keeps the pause in the memo
	// (accountapi.MemoPause).
	// Live since 2026-11-25; asked in account.go.
	versionPauseMemo = "pause-memo"
)
