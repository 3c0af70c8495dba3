package clidoc

import (
	"fmt"
	"slices"
	"strings"
)

// bash is p's completion for bash: a function that reads COMP_WORDS, finds
// the verb (the first word that is neither a flag nor a flag's value), and
// offers the verbs, the flags of that verb, or a flag's values (files,
// directories, or its words). For pool-run, whose flags end at the command
// it runs, the words from there on complete as that command's (through
// bash-completion's _command_offset where it is loaded, else as files).
func bash(p *program) string {
	fn := "__durable_lease_" + strings.ReplaceAll(p.name, "-", "_")
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", generated(p, "bash"))
	fmt.Fprintf(&b, "# Source it, or install it as bash-completion/completions/%s.\n\n", p.name)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev= verb= words= i w\n")
	b.WriteString("\tif ((COMP_CWORD > 0)); then prev=${COMP_WORDS[COMP_CWORD - 1]}; fi\n")
	b.WriteString("\t# bash splits --flag=value at the \"=\".\n")
	b.WriteString("\tif [[ $cur == = ]]; then\n\t\tcur=\n\telif [[ $prev == = ]] && ((COMP_CWORD > 1)); then\n\t\tprev=${COMP_WORDS[COMP_CWORD - 2]}\n\tfi\n")

	values := valueFlags(p)
	// A flag's value.
	b.WriteString("\tcase $prev in\n")
	for _, k := range []valueKind{dirValue, fileValue, anyValue} {
		var names []string
		for _, f := range values {
			if f.kind == k {
				names = append(names, "--"+f.name)
			}
		}
		if len(names) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\t%s)\n", strings.Join(names, " | "))
		switch k {
		case dirValue:
			b.WriteString("\t\tcompopt -o filenames 2>/dev/null\n\t\tCOMPREPLY=($(compgen -d -- \"$cur\"))\n")
		case fileValue:
			b.WriteString("\t\tcompopt -o filenames 2>/dev/null\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n")
		default:
			b.WriteString("\t\tCOMPREPLY=()\n")
		}
		b.WriteString("\t\treturn\n\t\t;;\n")
	}
	for _, f := range values {
		if f.kind == wordValue {
			fmt.Fprintf(&b, "\t--%s)\n\t\tCOMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n\t\treturn\n\t\t;;\n", f.name, strings.Join(f.words, " "))
		}
	}
	b.WriteString("\tesac\n")

	// The verb, or where pool-run's command starts.
	var valueNames []string
	for _, f := range values {
		valueNames = append(valueNames, "--"+f.name)
	}
	b.WriteString("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tw=${COMP_WORDS[i]}\n\t\tcase $w in\n")
	if len(valueNames) > 0 {
		fmt.Fprintf(&b, "\t\t%s)\n", strings.Join(valueNames, " | "))
		b.WriteString("\t\t\tif [[ ${COMP_WORDS[i + 1]} == = ]]; then i=$((i + 2)); else i=$((i + 1)); fi\n\t\t\t;;\n")
	}
	if p.runsCommand {
		b.WriteString("\t\t--)\n\t\t\tverb=$((i + 1))\n\t\t\tbreak\n\t\t\t;;\n")
		b.WriteString("\t\t-*) ;;\n\t\t*)\n\t\t\tverb=$i\n\t\t\tbreak\n\t\t\t;;\n\t\tesac\n\tdone\n")
		// From the command's first word on, the words are its own.
		b.WriteString("\tif [[ -n $verb ]]; then\n")
		b.WriteString("\t\tif ((verb == COMP_CWORD)); then\n\t\t\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n")
		b.WriteString("\t\telif declare -F _command_offset >/dev/null; then\n\t\t\t_command_offset \"$verb\"\n")
		b.WriteString("\t\telse\n\t\t\tcompopt -o filenames 2>/dev/null\n\t\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\t\tfi\n\t\treturn\n\tfi\n")
		fmt.Fprintf(&b, "\tif [[ $cur == -* ]]; then\n\t\twords='%s'\n\t\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n", flagWords(p.flags))
		b.WriteString("\telse\n\t\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n\tfi\n}\n")
	} else {
		b.WriteString("\t\t-*) ;;\n\t\t*)\n\t\t\tverb=$w\n\t\t\tbreak\n\t\t\t;;\n\t\tesac\n\tdone\n")
		b.WriteString("\tcase $verb in\n\t'')\n")
		var verbs []string
		for _, v := range p.verbs {
			verbs = append(verbs, v.name)
		}
		fmt.Fprintf(&b, "\t\tif [[ $cur == -* ]]; then words='%s'; else words='%s'; fi\n\t\t;;\n", flagWords(p.flags), strings.Join(verbs, " "))
		for _, v := range p.verbs {
			fmt.Fprintf(&b, "\t%s) words='%s' ;;\n", v.name, flagWords(v.flags))
		}
		b.WriteString("\tesac\n\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\n")
	}
	fmt.Fprintf(&b, "complete -F %s %s\n", fn, p.name)
	return b.String()
}

// flagWords are the words of fs as a shell types them.
func flagWords(fs []flag) string {
	var w []string
	for _, f := range fs {
		w = append(w, "--"+f.name)
		if f.short != 0 {
			w = append(w, "-"+string(f.short))
		}
	}
	return strings.Join(w, " ")
}

// valueFlags are the flags of p that take a value, each once, in the
// order they first appear (the root's, then each verb's).
func valueFlags(p *program) []flag {
	var out []flag
	add := func(fs []flag) {
		for _, f := range fs {
			if f.kind != noValue && !slices.ContainsFunc(out, func(g flag) bool { return g.name == f.name }) {
				out = append(out, f)
			}
		}
	}
	add(p.flags)
	for _, v := range p.verbs {
		add(v.flags)
	}
	return out
}
