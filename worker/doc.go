// Command worker runs a Temporal worker that executes TaskWorkflow and its
// activities. Its configuration (work root, conductor command, brief sink,
// karvi address and token) lives in the worker's flags and environment, never
// in workflow input.
package main
