package main

import (
	"flag"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/stretchr/testify/require"
)

// Every command, and every group of commands, answers -h with its usage,
// once, on stdout: the command's usage lists each of its flags.
func TestEveryCommandsHelpWorks(t *testing.T) {
	tree := commandTree()
	paths := commandPaths(tree)
	require.Len(t, commands, len(slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return lookup(p) == nil })),
		"every command is a node of the tree")
	for _, path := range paths {
		for _, args := range [][]string{
			append(strings.Fields(path), "-h"),
			append(strings.Fields(path), "--help"),
			append([]string{"help"}, strings.Fields(path)...),
		} {
			code, out, errOut := cliRun(t, args...)
			require.Equal(t, 0, code, "%v: %s", args, errOut)
			require.Empty(t, errOut, "%v", args)
			require.Equal(t, 1, strings.Count(out, "Usage:"), "%v:\n%s", args, out)
			if path == "help" {
				require.Contains(t, out, "Usage: starter [connection flags] <command>", "%v", args)
				continue
			}
			require.Contains(t, out, "Usage: starter ", "%v", args)
			require.Contains(t, out, " "+path+" ", "%v", args)
			n := find(tree, path)
			for _, s := range n.Subcommands {
				require.Contains(t, out, "starter "+path+" "+s.Name+" ", "%v lists its subcommands", args)
			}
			if lookup(path) == nil {
				continue // a group: its commands' -h list their flags
			}
			n.FlagSet.VisitAll(func(f *flag.Flag) {
				require.Regexp(t, "(?m)^  -"+regexp.QuoteMeta(f.Name)+"( |$)", out, "%v lists -%s", args, f.Name)
			})
		}
	}
	// The starter's own usage lists each command in a group.
	_, out, _ := cliRun(t, "-h")
	for _, g := range groups {
		require.Contains(t, out, "\n"+g.title+":\n")
	}
}

// The completion scripts hold the tree: for each node, its subcommands and
// flags, and which flags take a value, exactly.
func TestCompletionScriptsNameEveryCommandAndFlag(t *testing.T) {
	tree := commandTree()
	want := map[string]completionNode{}
	var walk func(*ffcli.Command)
	walk = func(n *ffcli.Command) {
		key := strings.TrimSpace("starter " + pathOf(n))
		var cn completionNode
		for _, s := range n.Subcommands {
			cn.subs = append(cn.subs, completionWord{name: s.Name})
		}
		n.FlagSet.VisitAll(func(f *flag.Flag) {
			cn.flags = append(cn.flags, completionWord{name: "-" + f.Name})
		})
		want[key] = cn
		for _, s := range n.Subcommands {
			walk(s)
		}
	}
	walk(tree)
	require.Contains(t, want, "starter run budget set")
	require.Contains(t, want, "starter completion")

	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, script, errOut := cliRun(t, "completion", shell)
		require.Equal(t, 0, code, errOut)
		got := map[string][2]string{}
		switch shell {
		case "bash":
			re := regexp.MustCompile(`(?m)^\tsubs\['([a-z -]+)'\]='([a-z -]*)' flags\['[a-z -]+'\]='([a-z -]*)'`)
			for _, m := range re.FindAllStringSubmatch(script, -1) {
				got[m[1]] = [2]string{m[2], m[3]}
			}
		case "zsh":
			for i, table := range []string{"subs", "flags"} {
				list := regexp.MustCompile(`(?s)\t` + table + `=\(\n(.*?)\n\t\)`).FindStringSubmatch(script)
				require.NotNil(t, list, "zsh: %s", table)
				for _, m := range regexp.MustCompile(`(?m)^\t\t'([a-z -]+)' '([a-z -]*)'$`).FindAllStringSubmatch(list[1], -1) {
					g := got[m[1]]
					g[i] = m[2]
					got[m[1]] = g
				}
			}
		case "fish":
			re := regexp.MustCompile(`(?m)^complete -c starter -n '__starter_at \\'([a-z -]+)\\'' -(a|o) ([a-z-]+)`)
			for _, m := range re.FindAllStringSubmatch(script, -1) {
				g := got[m[1]]
				if m[2] == "a" {
					g[0] = strings.TrimSpace(g[0] + " " + m[3])
				} else {
					g[1] = strings.TrimSpace(g[1] + " -" + m[3])
				}
				got[m[1]] = g
			}
			// A node without subcommands or flags has no line; none is so.
		}
		for key, n := range want {
			require.Equal(t, [2]string{names(n.subs), names(n.flags)}, got[key], "%s: node %q", shell, key)
		}
		require.Len(t, got, len(want), "%s: no node that is not in the tree", shell)
	}
}

// Each shell that is installed completes from its script as the tree
// says: commands, subcommands, flags, and a flag's value is not taken for
// a command.
func TestShellsCompleteTheTree(t *testing.T) {
	tree := commandTree()
	cases := map[string][]string{} // the words before the cursor's, and its -> what it completes
	for _, path := range append([]string{""}, commandPaths(tree)...) {
		n := find(tree, path)
		var subs, flags []string
		for _, s := range n.Subcommands {
			subs = append(subs, s.Name)
		}
		n.FlagSet.VisitAll(func(f *flag.Flag) { flags = append(flags, "-"+f.Name) })
		line := strings.TrimSpace("starter " + path)
		if len(subs) > 0 {
			cases[line+" |"] = subs
			cases[strings.Replace(line, "starter", "starter -address run", 1)+" |"] = subs
		}
		cases[line+" -|"] = flags
	}
	var lines []string
	for line := range cases {
		lines = append(lines, line)
	}
	slices.Sort(lines)

	drivers := map[string]struct {
		args    []string
		prelude string
		call    func(words []string, cur string) string
	}{
		"bash": {[]string{"--norc", "--noprofile", "-c"},
			"t() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=(); _starter; echo \"${COMPREPLY[*]}\"; }\n",
			func(words []string, cur string) string { return "t " + quoteAll(words) + " " + quote(cur) }},
		"zsh": {[]string{"-f", "-c"},
			"_describe() { local -a a out; local x; a=(\"${(@P)4}\"); for x in \"${a[@]}\"; do out+=(\"${x%%:*}\"); done; print -r -- \"${out[*]}\"; }\n" +
				"_files() { :; }\ncompdef() { :; }\n" +
				"t() { words=(\"$@\"); CURRENT=$#words; _starter || print; }\n",
			func(words []string, cur string) string { return "t " + quoteAll(words) + " " + quote(cur) }},
		"fish": {[]string{"--no-config", "-c"}, "",
			func(words []string, cur string) string {
				return "echo (complete -C " + fishQuote(strings.Join(append(words, cur), " ")) + " | string replace -r '\\t.*' '')"
			}},
	}
	for shell, d := range drivers {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Skipf("no %s here", shell)
			}
			code, script, _ := cliRun(t, "completion", shell)
			require.Equal(t, 0, code)
			var b strings.Builder
			if shell == "fish" {
				b.WriteString(script + "\n")
			} else {
				b.WriteString(d.prelude + script + "\n")
			}
			for _, line := range lines {
				words := strings.Fields(strings.TrimSuffix(line, "|"))
				cur := ""
				if strings.HasSuffix(line, "-|") {
					words, cur = words[:len(words)-1], "-"
				}
				b.WriteString(d.call(words, cur) + "\n")
			}
			cmd := exec.Command(shell, append(d.args, b.String())...)
			cmd.Dir = t.TempDir() // no file names among the answers
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			require.Len(t, got, len(lines), "%s", out)
			for i, line := range lines {
				want := slices.Sorted(slices.Values(cases[line]))
				have := slices.Sorted(slices.Values(strings.Fields(got[i])))
				require.Equal(t, want, have, "%s completing %q", shell, line)
			}
		})
	}
}

func quoteAll(words []string) string {
	var q []string
	for _, w := range words {
		q = append(q, quote(w))
	}
	return strings.Join(q, " ")
}

// A mistake names what is wrong: the command or the flag.
func TestUnknownCommandsAndFlagsAreNamed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run", "frobnicate", "x"}, `unknown command "run"`},
		{[]string{"schedule"}, `unknown command "schedule"`},
		{[]string{"help", "run", "frobnicate"}, `unknown command "run frobnicate"`},
		{[]string{"-frob", "status", "T5"}, "flag provided but not defined: -frob"},
		{[]string{"status", "-frob", "T5"}, "flag provided but not defined: -frob"},
		{[]string{"status", "T5", "-frob"}, "flag provided but not defined: -frob"},
		{[]string{"run", "status", "-frob", "s"}, "flag provided but not defined: -frob"},
		{[]string{"run", "-json", "status", "s"}, "flag provided but not defined: -json"},
		{[]string{"slots", "set", "-max-total", "x"}, `invalid value "x" for flag -max-total: not a number: "x"`},
		{[]string{"schedule", "create", "-min-interval", "soon", "f.json"}, "invalid value \"soon\" for flag -min-interval"},
		{[]string{"account", "-json", "resume"}, `-json is a flag of "account", not of "account resume"`},
		{[]string{"completion", "tcsh"}, `completion: unknown shell "tcsh": want bash, zsh or fish`},
		{[]string{"completion"}, "completion takes exactly one argument, <bash|zsh|fish>; got 0"},
		{[]string{"slots", "extra"}, `slots takes no argument; got ["extra"]`},
	} {
		code, out, errOut := cliRun(t, c.args...)
		require.Equal(t, 2, code, "%v", c.args)
		require.Empty(t, out, "%v", c.args)
		require.True(t, strings.HasPrefix(errOut, "starter: "+c.want), "%v:\n%s", c.args, errOut)
		require.Equal(t, 1, strings.Count(errOut, "Usage:"), "%v:\n%s", c.args, errOut)
	}
}

// Every flag of every command parses as -flag v and as -flag=v (and, as
// the flag package allows, --flag=v), to the same values, which differ
// from the command's without the flag.
func TestEveryFlagParsesInBothForms(t *testing.T) {
	tree := commandTree()
	n := 0
	for _, c := range commands {
		var args []string
		for range c.wantArgs() {
			args = append(args, "x.json")
		}
		plain := append(strings.Fields(c.name), args...)
		without, err := parseArgs(plain)
		require.NoError(t, err, "%v", plain)
		find(tree, c.name).FlagSet.VisitAll(func(f *flag.Flag) {
			n++
			var forms [][]string
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				forms = [][]string{{"-" + f.Name}, {"-" + f.Name + "=true"}, {"--" + f.Name + "=true"}}
			} else {
				v := sampleValue(t, f)
				forms = [][]string{{"-" + f.Name, v}, {"-" + f.Name + "=" + v}, {"--" + f.Name + "=" + v}, {"--" + f.Name, v}}
			}
			var first *invocation
			for _, form := range forms {
				// Before the argument and after it.
				for _, line := range [][]string{
					slices.Concat(strings.Fields(c.name), form, args),
					slices.Concat(strings.Fields(c.name), args, form),
				} {
					inv, err := parseArgs(line)
					require.NoError(t, err, "%v", line)
					require.Equal(t, args, inv.args, "%v", line)
					if first == nil {
						first = &inv
						require.NotEqual(t, []any{without.opts, without.conn}, []any{inv.opts, inv.conn}, "%v: the flag was read", line)
						continue
					}
					require.Equal(t, first.opts, inv.opts, "%v", line)
					require.Equal(t, first.conn, inv.conn, "%v", line)
				}
			}
		})
	}
	require.Greater(t, n, 100, "flags tried")
}

// sampleValue is a value f takes that is not its default.
func sampleValue(t *testing.T, f *flag.Flag) string {
	t.Helper()
	for _, v := range []string{"3", "5s", "sample"} {
		fs := flagSet("sample")
		fs.Var(f.Value, f.Name, "")
		if v != f.DefValue && fs.Set(f.Name, v) == nil {
			return v
		}
	}
	t.Fatalf("no sample value for -%s", f.Name)
	return ""
}
