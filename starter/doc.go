// Command starter starts, signals and inspects task workflows, and prints the
// plan.yaml a DispatchPlan would produce (the dry run).
//
// Each command is a row of commands.go: its name, argument, summary, and
// its options type, whose flags method declares each of its flags once on
// the command's flag set, with its handler. cli.go makes the rows an ffcli
// command tree, parsed with the standard flag package (-flag value,
// -flag=value); help, the usage's groups and the completion scripts of
// completion.go are all read from that tree.
package main
