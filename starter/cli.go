package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/peterbourgon/ff/v3/ffcli"
	"go.temporal.io/sdk/client"

	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/temporalconn"
)

// The starter's command line is a tree of ffcli commands (commands.go
// lists the leaves). ffcli keeps the standard flag package, so flags are
// written as they always were, -flag value or -flag=value, and each flag is
// declared once, on its command's flag set: parsing, help (-h) and shell
// completion (completion.go) all read it from there.

// command is one command of the starter: its name (one to three words:
// "run budget set"), its argument, what it does, and its flags with the
// handler that reads them. Every command also takes the connection flags,
// before or after its name.
type command struct {
	name, arg, summary string
	// nargs is how many arguments arg names (default one); noArg: none.
	nargs int
	noArg bool
	// declare declares the command's own flags on fs, each once, and
	// returns where they are parsed to and the handler that reads them
	// (local and remote make it).
	declare func(fs *flag.FlagSet) (opts any, run func(*env) error)
}

func (c *command) wantArgs() int {
	if c.noArg {
		return 0
	}
	return max(c.nargs, 1)
}

// group is a heading of the usage and its commands.
type group struct {
	title    string
	commands []*command
}

// noFlags is the options of a command without flags of its own.
type noFlags struct{}

// checker is options that can tell, once parsed, that they cannot work:
// the error is a usage error of the command.
type checker interface{ check() error }

// checkFlags refuses flags that cannot work together, before anything
// reaches Temporal.
func checkFlags(inv invocation) error {
	if ch, ok := inv.opts.(checker); ok {
		if err := ch.check(); err != nil {
			return &usageError{msg: err.Error(), cmd: inv.cmd.name}
		}
	}
	return nil
}

// local makes a command that needs no Temporal.
func local[O any](flags func(*O, *flag.FlagSet), run func(*env, *O) error) func(*flag.FlagSet) (any, func(*env) error) {
	return func(fs *flag.FlagSet) (any, func(*env) error) {
		o := new(O)
		if flags != nil {
			flags(o, fs)
		}
		return o, func(e *env) error { return run(e, o) }
	}
}

// remote makes a command that needs Temporal: its handler gets the client,
// dialled as the connection flags say.
func remote[O any](flags func(*O, *flag.FlagSet), run func(*env, client.Client, *O) error) func(*flag.FlagSet) (any, func(*env) error) {
	return local(flags, func(e *env, o *O) error {
		cl, err := e.client()
		if err != nil {
			return err
		}
		return run(e, cl, o)
	})
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// invocation is a command line, parsed.
type invocation struct {
	cmd  *command
	conn temporalconn.Flags
	// opts are the command's own flags, as its declare made them (*O).
	opts any
	run  func(*env) error
	arg  string
	// args are all the arguments; arg is the first.
	args []string
}

// usageError is a mistake on the command line; cmd names the command or
// group of commands it concerns, "" for the starter as a whole.
type usageError struct {
	msg string
	cmd string
}

func (e *usageError) Error() string { return e.msg }

// helpRequest is -h, --help or `help`, for a command or group ("": all).
type helpRequest struct{ cmd string }

func (*helpRequest) Error() string { return "help requested" }

// flagSet is a flag set that prints nothing: errors and usage are printed
// once, by cli.
func flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// connFlags are the names of the connection flags.
var connFlags = func() map[string]bool {
	fs := flagSet("")
	(&temporalconn.Flags{}).Register(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}()

// parser builds the command tree for one command line: each node's flag
// set writes into inv, and a leaf, once run, finishes reading its
// arguments into inv.
type parser struct {
	inv *invocation
	// failed is the node whose flags did not parse (or asked for help).
	failed string
	// args is the whole command line, to tell where "--" ended the flags.
	args []string
}

// tree is the starter's command tree. Its nodes are named by their path
// (their flag sets are named "starter <path>"); a group (run, schedule, ...)
// is a node without a command of its own.
func (p *parser) tree() *ffcli.Command {
	root := p.node("", nil)
	root.ShortHelp = "start and operate karvi tasks, runs, slot pools, accounts, schedules and the intake"
	root.Exec = func(_ context.Context, args []string) error {
		if len(args) == 0 {
			return &usageError{msg: "no command given"}
		}
		return &usageError{msg: fmt.Sprintf("unknown command %q", args[0])}
	}
	for _, c := range commands {
		parent := root
		words := strings.Fields(c.name)
		for i, w := range words {
			n := subcommand(parent, w)
			if n == nil {
				n = p.node(strings.Join(words[:i+1], " "), nil)
				parent.Subcommands = append(parent.Subcommands, n)
			}
			if i == len(words)-1 {
				p.attach(n, c, parent)
			}
			parent = n
		}
	}
	help := p.node("help", nil)
	help.ShortUsage = "starter help [command]"
	help.ShortHelp = "show the usage of the starter, or of a command"
	help.Exec = func(_ context.Context, args []string) error {
		n := root
		for i, w := range args {
			if n = subcommand(n, w); n == nil {
				return &usageError{msg: fmt.Sprintf("unknown command %q", strings.Join(args[:i+1], " "))}
			}
		}
		return &helpRequest{cmd: pathOf(n)}
	}
	root.Subcommands = append(root.Subcommands, help)
	return root
}

// node is a node of the tree for path, with the connection flags; cmd's
// own flags are added by attach.
func (p *parser) node(path string, c *command) *ffcli.Command {
	fs := flagSet(strings.TrimSpace("starter " + path))
	p.inv.conn.Register(fs)
	words := strings.Fields(path)
	name := "starter"
	if len(words) > 0 {
		name = words[len(words)-1]
	}
	n := &ffcli.Command{Name: name, FlagSet: fs, ShortUsage: strings.TrimSpace("starter " + path + " <command>")}
	// ffcli asks for the usage when a node's flags fail to parse: the
	// node is noted so that cli prints its usage, once.
	n.UsageFunc = func(*ffcli.Command) string { p.failed = path; return "" }
	// A group alone, or with a word that names none of its commands.
	n.Exec = func(context.Context, []string) error {
		return &usageError{msg: fmt.Sprintf("unknown command %q", path), cmd: path}
	}
	return n
}

// attach makes n the node of command c: c's own flags join its flag set,
// and its Exec reads the arguments and flags that follow ffcli's parse.
func (p *parser) attach(n *ffcli.Command, c *command, parent *ffcli.Command) {
	opts, run := c.declare(n.FlagSet)
	n.ShortUsage = "starter " + synopsis(c)
	n.ShortHelp = c.summary
	n.Exec = func(_ context.Context, rest []string) error {
		if err := ownFlagsOf(parent, c); err != nil {
			return err
		}
		args, err := p.arguments(c, n.FlagSet, rest)
		if err != nil {
			return err
		}
		*p.inv = invocation{cmd: c, conn: p.inv.conn, opts: opts, run: run, args: args}
		if len(args) > 0 {
			p.inv.arg = args[0]
		}
		return nil
	}
}

// ownFlagsOf refuses a flag of a command given before the name of one of
// its subcommands ("account -json resume"): it would be lost.
func ownFlagsOf(parent *ffcli.Command, c *command) error {
	var err error
	parent.FlagSet.Visit(func(f *flag.Flag) {
		if !connFlags[f.Name] && err == nil {
			err = &usageError{cmd: c.name, msg: fmt.Sprintf("-%s is a flag of %q, not of %q: give it after %q", f.Name, pathOf(parent), c.name, c.name)}
		}
	})
	return err
}

// arguments reads c's arguments, and the flags between and after them:
// ffcli's parse stops at the first argument (`status T5 -address X`).
// "--" ends the flags.
func (p *parser) arguments(c *command, fs *flag.FlagSet, rest []string) ([]string, error) {
	var positional []string
	dashes := endsWithDashes(p.args[:len(p.args)-len(rest)])
	for len(rest) > 0 {
		if dashes {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		next := rest[1:]
		if err := fs.Parse(next); err == flag.ErrHelp {
			return nil, &helpRequest{cmd: c.name}
		} else if err != nil {
			return nil, &usageError{msg: err.Error(), cmd: c.name}
		}
		rest = fs.Args()
		dashes = endsWithDashes(next[:len(next)-len(rest)])
	}
	if want := c.wantArgs(); len(positional) != want {
		if want == 0 {
			return nil, &usageError{cmd: c.name,
				msg: fmt.Sprintf("%s takes no argument; got %q", c.name, positional)}
		}
		what := "exactly one argument"
		if want > 1 {
			what = fmt.Sprintf("%d arguments", want)
		}
		return nil, &usageError{cmd: c.name,
			msg: fmt.Sprintf("%s takes %s, %s; got %d", c.name, what, c.arg, len(positional))}
	}
	return positional, nil
}

// endsWithDashes: the flags just read ended with "--".
func endsWithDashes(read []string) bool {
	return len(read) > 0 && read[len(read)-1] == "--"
}

// subcommand is n's subcommand named name, nil if none.
func subcommand(n *ffcli.Command, name string) *ffcli.Command {
	for _, s := range n.Subcommands {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// pathOf is a node's path, "" for the root: its flag set is named
// "starter <path>".
func pathOf(n *ffcli.Command) string {
	return strings.TrimPrefix(strings.TrimPrefix(n.FlagSet.Name(), "starter"), " ")
}

// parseArgs reads `starter [connection flags] <command> [flags] <argument>`.
// A command's flags may also follow its argument (`status T5 -address X`);
// "--" ends the flags.
func parseArgs(args []string) (invocation, error) {
	inv := invocation{conn: temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue}}
	p := &parser{inv: &inv, args: args}
	root := p.tree()
	err := root.Parse(args)
	if err == nil {
		// The chosen node's Exec finishes the parse: it runs no handler.
		err = root.Run(context.Background())
	}
	var ue *usageError
	var help *helpRequest
	switch {
	case err == nil:
		return inv, nil
	case errors.Is(err, flag.ErrHelp):
		return inv, &helpRequest{cmd: p.failed}
	case errors.As(err, &ue), errors.As(err, &help):
		return inv, err
	}
	// ff wraps the flag package's error, whose words name the flag.
	if inner := errors.Unwrap(err); inner != nil {
		err = inner
	}
	return inv, &usageError{msg: err.Error(), cmd: p.failed}
}

// commandTree is the tree as help and completion read it.
func commandTree() *ffcli.Command {
	inv := invocation{conn: temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue}}
	return (&parser{inv: &inv}).tree()
}

// find is the node of path in tree, nil if none.
func find(tree *ffcli.Command, path string) *ffcli.Command {
	n := tree
	for _, w := range strings.Fields(path) {
		if n = subcommand(n, w); n == nil {
			return nil
		}
	}
	return n
}

const usageFooter = `TLS, API keys and profiles come from the temporal CLI's profile file and
environment (TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_CONFIG_FILE,
TEMPORAL_PROFILE; docs/configuration.md), payload encryption from
KARVI_TEMPORAL_CODEC_KEY. KARVI_EDDA_TIME_SCALE (tests and soaks: at 60 a
minute lasts a second) is handed to the tasks, runs and pools it starts, as
the worker's -time-scale. "starter <command> -h" (or "starter help
<command>") shows a command's flags; "starter completion bash|zsh|fish"
prints a shell completion script.
`

// printUsage prints the usage of the command or group named path, or of
// the starter when path is "".
func printUsage(w io.Writer, path string) {
	tree := commandTree()
	n := find(tree, path)
	if n == nil || path == "help" {
		n, path = tree, ""
	}
	if c := lookup(path); c != nil {
		fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags (the connection's may also come before %q):\n", strings.TrimSpace("starter "+c.name+" [flags] "+c.arg), c.summary, c.name)
		n.FlagSet.SetOutput(w)
		n.FlagSet.PrintDefaults()
		if len(n.Subcommands) > 0 {
			fmt.Fprintf(w, "\nCommands under %q:\n", c.name)
			printCommands(w, n.Subcommands)
		}
		return
	}
	if path != "" {
		fmt.Fprintf(w, "Usage: starter [connection flags] %s <command> [flags] <argument>\n\nCommands:\n", path)
		printCommands(w, n.Subcommands)
		fmt.Fprintf(w, "\n\"starter %s <command> -h\" shows a command's flags, the connection's included.\n", path)
		return
	}
	fmt.Fprint(w, "starter: start and operate karvi tasks, runs of dependent tasks, agent slot pools,\nagent accounts, schedule intents and the karvi intake on Temporal\n\n"+
		"Usage: starter [connection flags] <command> [flags] <argument>\n")
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
		for _, c := range g.commands {
			fmt.Fprintf(tw, "  starter %s\t%s\n", synopsis(c), c.summary)
		}
		tw.Flush()
	}
	fmt.Fprint(w, "\nConnection flags, before or after the command:\n")
	fs := flagSet("starter")
	(&temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue}).Register(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\n"+usageFooter)
}

// printCommands lists nodes and, under each, their subcommands.
func printCommands(w io.Writer, nodes []*ffcli.Command) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	var walk func([]*ffcli.Command)
	walk = func(nodes []*ffcli.Command) {
		for _, n := range nodes {
			if c := lookup(pathOf(n)); c != nil {
				fmt.Fprintf(tw, "  starter %s\t%s\n", synopsis(c), c.summary)
			}
			walk(n.Subcommands)
		}
	}
	walk(nodes)
	tw.Flush()
}

// synopsis is c's command line with its own flags, e.g.
// "abort [-reason reason] <taskId>"; a command with many flags shows
// "[flags]" (its -h lists them).
const maxSynopsisFlags = 4

func synopsis(c *command) string {
	parts := []string{c.name}
	fs := flagSet(c.name)
	c.declare(fs)
	var flags []string
	fs.VisitAll(func(f *flag.Flag) {
		if name, _ := flag.UnquoteUsage(f); name != "" {
			flags = append(flags, fmt.Sprintf("[-%s %s]", f.Name, name))
		} else {
			flags = append(flags, fmt.Sprintf("[-%s]", f.Name))
		}
	})
	if len(flags) > maxSynopsisFlags {
		flags = []string{"[flags]"}
	}
	parts = append(parts, flags...)
	if c.arg != "" {
		parts = append(parts, c.arg)
	}
	return strings.Join(parts, " ")
}

// commandPaths are the paths of every node of the tree but the root, in
// the tree's order.
func commandPaths(tree *ffcli.Command) []string {
	var paths []string
	var walk func(*ffcli.Command)
	walk = func(n *ffcli.Command) {
		for _, s := range n.Subcommands {
			paths = append(paths, pathOf(s))
			walk(s)
		}
	}
	walk(tree)
	return paths
}
