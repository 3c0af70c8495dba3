package clidoc

import (
	"fmt"
	"strings"
)

// fish is p's completion for fish: a complete line per verb and per flag
// of each verb (and of the root, before the verb), with its help; for
// pool-run, its flags until the command starts and then the command's own
// completions.
func fish(p *program) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", generated(p, "fish"))
	fmt.Fprintf(&b, "# Install it as fish/vendor_completions.d/%s.fish (or in ~/.config/fish/completions).\n\n", p.name)
	fmt.Fprintf(&b, "complete -c %s -f\n", p.name)
	if p.runsCommand {
		fn := "__durable_lease_" + strings.ReplaceAll(p.name, "-", "_") + "_command"
		var values []string
		for _, f := range valueFlags(p) {
			values = append(values, "--"+f.name)
		}
		// fn prints the words of the command being completed, once the
		// command line has reached it: pool-run's flags end at the first
		// word that is neither a flag nor a flag's value, or at "--".
		fmt.Fprintf(&b, "\nfunction %s\n\tset -l words (commandline -opc)\n\tset -l i 2\n", fn)
		b.WriteString("\twhile test $i -le (count $words)\n\t\tswitch $words[$i]\n")
		if len(values) > 0 {
			fmt.Fprintf(&b, "\t\t\tcase %s\n\t\t\t\tset i (math $i + 2)\n", strings.Join(values, " "))
		}
		b.WriteString("\t\t\tcase --\n\t\t\t\tset i (math $i + 1)\n\t\t\t\tbreak\n")
		b.WriteString("\t\t\tcase '-*'\n\t\t\t\tset i (math $i + 1)\n")
		b.WriteString("\t\t\tcase '*'\n\t\t\t\tbreak\n\t\tend\n\tend\n")
		b.WriteString("\ttest $i -le (count $words); or return 1\n\tprintf '%s\\n' $words[$i..-1]\nend\n\n")
		for _, f := range p.flags {
			fmt.Fprintf(&b, "complete -c %s -n 'not %s' %s\n", p.name, fn, fishFlag(f))
		}
		fmt.Fprintf(&b, "complete -c %s -n 'not %s; and not string match -q -- \"-*\" (commandline -ct)' -a '(__fish_complete_command)'\n", p.name, fn)
		fmt.Fprintf(&b, "complete -c %s -n %s -a '(complete -C (string join \" \" -- (string escape -- (%s)) (commandline -ct)))'\n", p.name, fn, fn)
		return b.String()
	}
	b.WriteString("\n# The verbs, and the flags before one.\n")
	for _, v := range p.verbs {
		fmt.Fprintf(&b, "complete -c %s -n __fish_use_subcommand -a %s -d %s\n", p.name, v.name, fishQuote(firstSentence(v.help)))
	}
	for _, f := range p.flags {
		fmt.Fprintf(&b, "complete -c %s -n __fish_use_subcommand %s\n", p.name, fishFlag(f))
	}
	for _, v := range p.verbs {
		fmt.Fprintf(&b, "\n# %s %s\n", p.name, v.name)
		for _, f := range v.flags {
			fmt.Fprintf(&b, "complete -c %s -n '__fish_seen_subcommand_from %s' %s\n", p.name, v.name, fishFlag(f))
		}
	}
	return b.String()
}

// fishFlag is the options of a complete line for f.
func fishFlag(f flag) string {
	s := "-l " + f.name
	if f.short != 0 {
		s += " -s " + string(f.short)
	}
	switch f.kind {
	case fileValue:
		s += " -r -F"
	case dirValue:
		s += " -x -a '(__fish_complete_directories (commandline -ct))'"
	case wordValue:
		s += " -x -a " + fishQuote(strings.Join(f.words, " "))
	case anyValue:
		s += " -x"
	}
	return s + " -d " + fishQuote(firstSentence(f.help))
}

// fishQuote single-quotes s for fish, where \ and ' are escaped inside.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
