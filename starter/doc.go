// Command starter starts, signals and inspects task workflows, and prints the
// plan.yaml a DispatchPlan would produce (the dry run).
package main
