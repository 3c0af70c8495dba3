package clidoc

import (
	"fmt"
	"strings"
)

// zsh is p's completion for zsh, a #compdef file for a directory of
// $fpath: _arguments with every flag and its help, the verbs with theirs
// (_describe), and for pool-run the command after its flags (_normal).
func zsh(p *program) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# %s\n", p.name, generated(p, "zsh"))
	fmt.Fprintf(&b, "# Install it as _%s in a directory of $fpath (before compinit runs).\n\n", p.name)
	if p.runsCommand {
		// -A '-*': pool-run's flags end at the command's first word.
		b.WriteString("_arguments -S -A '-*' \\\n")
		for _, f := range p.flags {
			fmt.Fprintf(&b, "\t%s \\\n", zshSpec(f))
		}
		b.WriteString("\t'1:command:_command_names -e' \\\n\t'*::arguments:_normal'\n")
		return b.String()
	}
	b.WriteString("local curcontext=$curcontext state line ret=1\ntypeset -A opt_args\n\n")
	b.WriteString("_arguments -C -S \\\n")
	for _, f := range p.flags {
		fmt.Fprintf(&b, "\t%s \\\n", zshSpec(f))
	}
	b.WriteString("\t'1: :->verb' \\\n\t'*:: :->args' && ret=0\n\n")
	b.WriteString("case $state in\nverb)\n\tlocal -a verbs\n\tverbs=(\n")
	for _, v := range p.verbs {
		fmt.Fprintf(&b, "\t\t%s\n", zshQuote(v.name+":"+strings.ReplaceAll(firstSentence(v.help), ":", `\:`)))
	}
	fmt.Fprintf(&b, "\t)\n\t_describe -t commands %s verbs && ret=0\n\t;;\n", zshQuote(p.name+" verb"))
	fmt.Fprintf(&b, "args)\n\tcurcontext=${curcontext%%:*:*}:%s-$words[1]:\n\tcase $words[1] in\n", p.name)
	for _, v := range p.verbs {
		fmt.Fprintf(&b, "\t%s)\n\t\t_arguments -S", v.name)
		for _, f := range v.flags {
			fmt.Fprintf(&b, " \\\n\t\t\t%s", zshSpec(f))
		}
		b.WriteString(" && ret=0\n\t\t;;\n")
	}
	b.WriteString("\tesac\n\t;;\nesac\n\nreturn ret\n")
	return b.String()
}

// zshSpec is f as an _arguments spec.
func zshSpec(f flag) string {
	desc := "[" + zshEscape(firstSentence(f.help)) + "]"
	var action string
	switch f.kind {
	case noValue:
	case fileValue:
		action = ":" + zshEscape(f.placeholder) + ":_files"
	case dirValue:
		action = ":" + zshEscape(f.placeholder) + ":_files -/"
	case wordValue:
		action = ":" + zshEscape(f.placeholder) + ":(" + strings.Join(f.words, " ") + ")"
	default:
		action = ":" + zshEscape(f.placeholder) + ": "
	}
	long := "--" + f.name
	if f.kind != noValue {
		long += "=" // --flag=value or --flag value
	}
	if f.short != 0 {
		short := "-" + string(f.short)
		return zshQuote("("+short+" --"+f.name+")") + "{" + short + "," + long + "}" + zshQuote(desc+action)
	}
	return zshQuote(long + desc + action)
}

// zshEscape escapes what _arguments reads in a description or message.
func zshEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`).Replace(s)
}

// zshQuote single-quotes s for zsh.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// firstSentence is the help text up to its first full stop, on one line,
// without a parenthesis that ends it: what a completion menu shows beside
// a flag or a verb (the man page has the whole text).
func firstSentence(help string) string {
	text := strings.Join(strings.Fields(help), " ")
	if i := strings.Index(text, ". "); i >= 0 {
		text = text[:i+1]
	}
	text = strings.TrimSuffix(text, ".")
	if strings.HasSuffix(text, ")") {
		depth := 0
		for i := len(text) - 1; i > 0; i-- {
			switch text[i] {
			case ')':
				depth++
			case '(':
				depth--
			}
			if depth == 0 {
				if cut := strings.TrimRight(text[:i], " "); cut != "" {
					text = cut
				}
				break
			}
		}
	}
	return strings.TrimRight(text, ".;:,")
}
