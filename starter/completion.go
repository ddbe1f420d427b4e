package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// `starter completion bash|zsh|fish` prints a script that completes the
// starter's commands, subcommands and flags (and file names where a command
// reads a file). The scripts are made from the command tree, so a command
// or flag added to commands.go is completed without more: each holds, for
// every node of the tree, its subcommands, its flags and which of them take
// a value (whose word the script skips when it finds where the command
// line stands).

// completionNode is one node of the tree, as the scripts need it.
type completionNode struct {
	// key is "starter" and the node's path: "starter run budget". (bash
	// takes no empty key in an associative array, so the root is not "".)
	key   string
	subs  []completionWord
	flags []completionWord
	// values are the flags that take a value (not booleans).
	values []string
	// files: the command's argument is a file.
	files bool
}

type completionWord struct{ name, help string }

func completionNodes(tree *ffcli.Command) []completionNode {
	var nodes []completionNode
	var walk func(*ffcli.Command)
	walk = func(n *ffcli.Command) {
		cn := completionNode{key: strings.TrimSpace("starter " + pathOf(n))}
		for _, s := range n.Subcommands {
			help := s.ShortHelp
			if help == "" {
				help = pathOf(s) + " commands"
			}
			cn.subs = append(cn.subs, completionWord{s.Name, help})
		}
		n.FlagSet.VisitAll(func(f *flag.Flag) {
			_, usage := flag.UnquoteUsage(f)
			cn.flags = append(cn.flags, completionWord{"-" + f.Name, usage})
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				cn.values = append(cn.values, "-"+f.Name)
			}
		})
		if c := lookup(pathOf(n)); c != nil {
			cn.files = strings.Contains(c.arg, ".json")
		}
		nodes = append(nodes, cn)
		for _, s := range n.Subcommands {
			walk(s)
		}
	}
	walk(tree)
	return nodes
}

func completionCmd(e *env, _ *noFlags) error {
	script, err := completionScript(e.inv.arg, commandTree())
	if err != nil {
		return &usageError{msg: err.Error(), cmd: e.inv.cmd.name}
	}
	_, err = io.WriteString(e.stdout, script)
	return err
}

// completionScript is the completion script for shell.
func completionScript(shell string, tree *ffcli.Command) (string, error) {
	nodes := completionNodes(tree)
	switch shell {
	case "bash":
		return bashCompletion(nodes), nil
	case "zsh":
		return zshCompletion(nodes), nil
	case "fish":
		return fishCompletion(nodes), nil
	}
	return "", fmt.Errorf("completion: unknown shell %q: want bash, zsh or fish", shell)
}

func names(ws []completionWord) string {
	var s []string
	for _, w := range ws {
		s = append(s, w.name)
	}
	return strings.Join(s, " ")
}

// quote is s in single quotes, for any of the three shells.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fishQuote is s in single quotes for fish, which escapes within them.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// firstLine keeps a description short: its first clause.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// The walk over the words before the cursor is the same in bash and zsh:
// a word that names a subcommand of the node reached so far moves to it,
// a flag that takes a value skips the next word, "--" ends the flags.
const shellWalk = `		if ((skip)); then skip=0; continue; fi
		case $w in
		--) break ;;
		-*=*) ;;
		-*)
			f=${w#-}
			f=-${f#-}
			[[ " ${values[$node]} " == *" $f "* ]] && skip=1
			;;
		*) [[ " ${subs[$node]} " == *" $w "* ]] && node="$node $w" ;;
		esac
	done
`

func bashCompletion(nodes []completionNode) string {
	var b strings.Builder
	b.WriteString("# bash completion for starter, made by `starter completion bash`:\n" +
		"#   source <(starter completion bash)\n" +
		"_starter() {\n" +
		"\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n" +
		"\tlocal -A subs=() flags=() values=() files=()\n")
	for _, n := range nodes {
		k := quote(n.key)
		fmt.Fprintf(&b, "\tsubs[%s]=%s flags[%s]=%s values[%s]=%s\n", k, quote(names(n.subs)), k, quote(names(n.flags)), k, quote(strings.Join(n.values, " ")))
		if n.files {
			fmt.Fprintf(&b, "\tfiles[%s]=1\n", k)
		}
	}
	b.WriteString("\tlocal node=starter w f i skip=0\n" +
		"\tfor ((i = 1; i < COMP_CWORD; i++)); do\n" +
		"\t\tw=${COMP_WORDS[i]}\n" + shellWalk +
		"\tif ((skip)) || [[ $prev == = ]]; then\n" +
		"\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n" +
		"\t\treturn\n" +
		"\tfi\n" +
		"\tif [[ $cur == -* ]]; then\n" +
		"\t\tCOMPREPLY=($(compgen -W \"${flags[$node]}\" -- \"$cur\"))\n" +
		"\t\treturn\n" +
		"\tfi\n" +
		"\tCOMPREPLY=($(compgen -W \"${subs[$node]}\" -- \"$cur\"))\n" +
		"\tif [[ -n ${files[$node]} ]]; then\n" +
		"\t\tCOMPREPLY+=($(compgen -f -- \"$cur\"))\n" +
		"\tfi\n" +
		"}\n" +
		"complete -F _starter starter\n")
	return b.String()
}

func zshCompletion(nodes []completionNode) string {
	var b strings.Builder
	b.WriteString("#compdef starter\n" +
		"# zsh completion for starter, made by `starter completion zsh`:\n" +
		"#   source <(starter completion zsh)\n" +
		"_starter() {\n" +
		"\tlocal -A subs flags values files\n")
	// zsh keeps the quotes of a subscript in the key: the tables are set
	// from lists of key and value instead.
	for _, table := range []struct {
		name string
		of   func(completionNode) (string, bool)
	}{
		{"subs", func(n completionNode) (string, bool) { return names(n.subs), true }},
		{"flags", func(n completionNode) (string, bool) { return names(n.flags), true }},
		{"values", func(n completionNode) (string, bool) { return strings.Join(n.values, " "), true }},
		{"files", func(n completionNode) (string, bool) { return "1", n.files }},
	} {
		fmt.Fprintf(&b, "\t%s=(\n", table.name)
		for _, n := range nodes {
			if v, ok := table.of(n); ok {
				fmt.Fprintf(&b, "\t\t%s %s\n", quote(n.key), quote(v))
			}
		}
		b.WriteString("\t)\n")
	}
	// zsh's $path is the PATH array: the node is "node".
	b.WriteString("\tlocal node=starter w f i skip=0\n" +
		"\tfor ((i = 2; i < CURRENT; i++)); do\n" +
		"\t\tw=${words[i]}\n" + shellWalk +
		"\tif ((skip)); then\n" +
		"\t\t_files\n" +
		"\t\treturn\n" +
		"\tfi\n" +
		"\tlocal -a described\n" +
		"\tif [[ ${words[CURRENT]} == -* ]]; then\n" +
		"\t\tcase $node in\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "\t\t%s) described=(", quote(n.key))
		for i, f := range n.flags {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(quote(f.name + ":" + firstLine(f.help)))
		}
		b.WriteString(") ;;\n")
	}
	b.WriteString("\t\tesac\n" +
		"\t\t_describe -t flags flag described\n" +
		"\t\treturn\n" +
		"\tfi\n" +
		"\tcase $node in\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "\t%s) described=(", quote(n.key))
		for i, s := range n.subs {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(quote(s.name + ":" + firstLine(s.help)))
		}
		b.WriteString(") ;;\n")
	}
	b.WriteString("\tesac\n" +
		"\t(( ${#described} )) && _describe -t commands command described\n" +
		"\t[[ -n ${files[$node]} ]] && _files\n" +
		"\treturn 0\n" +
		"}\n" +
		"compdef _starter starter\n")
	return b.String()
}

func fishCompletion(nodes []completionNode) string {
	var b strings.Builder
	b.WriteString("# fish completion for starter, made by `starter completion fish`:\n" +
		"#   starter completion fish | source\n" +
		"function __starter_subs\n" +
		"\tswitch \"$argv[1]\"\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "\tcase %s\n\t\tprintf '%%s\\n' %s\n", fishQuote(n.key), names(n.subs))
	}
	b.WriteString("\tend\n" +
		"end\n" +
		"function __starter_values\n" +
		"\tswitch \"$argv[1]\"\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "\tcase %s\n\t\tprintf '%%s\\n' %s\n", fishQuote(n.key), strings.Join(n.values, " "))
	}
	b.WriteString("\tend\n" +
		"end\n" +
		"# __starter_node prints the node the words before the cursor reach.\n" +
		"function __starter_node\n" +
		"\tset -l node starter\n" +
		"\tset -l skip 0\n" +
		"\tfor w in (commandline -opc)[2..-1]\n" +
		"\t\tif test $skip = 1\n" +
		"\t\t\tset skip 0\n" +
		"\t\t\tcontinue\n" +
		"\t\tend\n" +
		"\t\tswitch $w\n" +
		"\t\tcase --\n" +
		"\t\t\tbreak\n" +
		"\t\tcase '-*=*'\n" +
		"\t\tcase '-*'\n" +
		"\t\t\tset -l f -(string replace -r -- '^--?' '' $w)\n" +
		"\t\t\tif contains -- $f (__starter_values \"$node\")\n" +
		"\t\t\t\tset skip 1\n" +
		"\t\t\tend\n" +
		"\t\tcase '*'\n" +
		"\t\t\tif contains -- $w (__starter_subs \"$node\")\n" +
		"\t\t\t\tset node \"$node $w\"\n" +
		"\t\t\tend\n" +
		"\t\tend\n" +
		"\tend\n" +
		"\techo $node\n" +
		"end\n" +
		"function __starter_at\n" +
		"\tset -l node (__starter_node)\n" +
		"\ttest \"$node\" = \"$argv[1]\"\n" +
		"end\n" +
		"complete -c starter -f\n")
	for _, n := range nodes {
		cond := fishQuote("__starter_at " + fishQuote(n.key))
		for _, s := range n.subs {
			fmt.Fprintf(&b, "complete -c starter -n %s -a %s -d %s\n", cond, s.name, fishQuote(firstLine(s.help)))
		}
		for i, f := range n.flags {
			r := ""
			if strings.Contains(" "+strings.Join(n.values, " ")+" ", " "+f.name+" ") {
				r = " -r"
			}
			fmt.Fprintf(&b, "complete -c starter -n %s -o %s%s -d %s\n", cond, strings.TrimPrefix(n.flags[i].name, "-"), r, fishQuote(firstLine(f.help)))
		}
		if n.files {
			fmt.Fprintf(&b, "complete -c starter -n %s -F\n", cond)
		}
	}
	return b.String()
}
