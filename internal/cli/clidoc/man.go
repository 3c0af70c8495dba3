package clidoc

import (
	"fmt"
	"slices"
	"strings"
)

// man is p's man page (roff, man(7) macros): its description as the help
// gives it (with the exit statuses), its flags, each verb with the flags
// of its own, the environment variables the flags read, and where the
// rest is documented. It carries no date, so that it changes only with
// the grammar.
func man(p *program, all []*program) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".\\\" The man page of %s, generated from its grammar by internal/cli/clidoc (go generate ./internal/cli/clidoc); do not edit.\n", p.name)
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"durable-lease\" \"durable-lease manual\"\n", strings.ToUpper(roffText(p.name)))
	b.WriteString(".nh\n") // no hyphenation: flags are copied from the page as they print
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", roffText(p.name), roffText(lowerFirst(p.summary())))
	b.WriteString(".SH SYNOPSIS\n")
	if p.runsCommand {
		fmt.Fprintf(&b, ".B %s\n[\\fIflags\\fR] [\\fB\\-\\-\\fR] \\fIcommand\\fR [\\fIargs\\fR...]\n.br\n", roffText(p.name))
		fmt.Fprintf(&b, ".B %s\n[\\fIflags\\fR] \\fB\\-\\-gate\\fR \\fIFILE\\fR\n", roffText(p.name))
	} else {
		fmt.Fprintf(&b, ".B %s\n\\fIcommand\\fR [\\fIflags\\fR]\n", roffText(p.name))
	}
	b.WriteString(".SH DESCRIPTION\n")
	b.WriteString(roffParagraphs(p.description))
	title := "OPTIONS"
	if len(p.verbs) > 0 {
		title = "GLOBAL OPTIONS"
	}
	fmt.Fprintf(&b, ".SH %s\n", title)
	if len(p.verbs) > 0 {
		b.WriteString("Every command takes these, before or after its name.\n")
	}
	for _, f := range p.flags {
		b.WriteString(roffFlag(f))
	}
	if len(p.verbs) > 0 {
		b.WriteString(".SH COMMANDS\n")
		for _, v := range p.verbs {
			fmt.Fprintf(&b, ".SS \"%s %s\"\n", roffText(p.name), roffText(v.name))
			b.WriteString(roffText(v.help) + "\n")
			for _, f := range v.own {
				b.WriteString(roffFlag(f))
			}
		}
	}
	var envs, flagOf []string // each variable, and the flag that reads it
	for _, f := range valueFlags(p) {
		for _, e := range f.envs {
			if !slices.Contains(envs, e) {
				envs, flagOf = append(envs, e), append(flagOf, f.name)
			}
		}
	}
	if len(envs) > 0 {
		b.WriteString(".SH ENVIRONMENT\nA flag given on the command line beats its variable.\n")
		for i, e := range envs {
			fmt.Fprintf(&b, ".TP\n.B %s\nas \\fB\\-\\-%s\\fR.\n", roffText(e), roffText(flagOf[i]))
		}
	}
	b.WriteString(".SH SEE ALSO\n")
	var see []string
	for _, o := range all {
		if o.name != p.name {
			see = append(see, fmt.Sprintf(".BR %s (1)", roffText(o.name)))
		}
	}
	b.WriteString(strings.Join(see, ",\n") + "\n.PP\n")
	b.WriteString("The documents of durable-lease (README.md, and docs/ of its source: CLI.md for lease, POOLS.md for pool, POOL-RUN.md for pool-run) have every flag, code and exit status with examples.\n")
	return b.String()
}

// roffFlag is one flag as a tagged paragraph: its name and value, its
// help, and the variable it reads.
func roffFlag(f flag) string {
	var tag strings.Builder
	tag.WriteString(".TP\n")
	if f.short != 0 {
		fmt.Fprintf(&tag, "\\fB\\-%c\\fR, ", f.short)
	}
	fmt.Fprintf(&tag, "\\fB\\-\\-%s\\fR", roffText(f.name))
	if f.kind != noValue {
		fmt.Fprintf(&tag, "=\\fI%s\\fR", roffText(f.placeholder))
	}
	tag.WriteString("\n" + roffText(f.help))
	if len(f.envs) > 0 {
		fmt.Fprintf(&tag, " (\\fB%s\\fR)", roffText(strings.Join(f.envs, ", ")))
	}
	tag.WriteString("\n")
	return tag.String()
}

// roffParagraphs renders help text: paragraphs at blank lines; in each,
// runs of plain lines filled, runs of indented lines (examples, tables)
// kept as they are.
func roffParagraphs(text string) string {
	var b strings.Builder
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		lines := strings.Split(para, "\n")
		for len(lines) > 0 {
			indented := strings.HasPrefix(lines[0], " ")
			n := 1
			for n < len(lines) && strings.HasPrefix(lines[n], " ") == indented {
				n++
			}
			if indented {
				b.WriteString(".RS 2\n.nf\n")
				for _, l := range lines[:n] {
					b.WriteString(roffLine(strings.TrimPrefix(l, "  ")) + "\n")
				}
				b.WriteString(".fi\n.RE\n")
			} else {
				b.WriteString(roffText(strings.Join(lines[:n], " ")) + "\n")
			}
			lines = lines[n:]
		}
	}
	return b.String()
}

// roffText is text for a filled line: one line, roff's escapes applied.
func roffText(s string) string { return roffLine(strings.Join(strings.Fields(s), " ")) }

// roffLine escapes one line: backslashes, hyphens (as \- so that they
// print as ASCII hyphen-minus, which readers copy into a terminal), and a
// leading dot or quote, which roff would read as a request.
func roffLine(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

func lowerFirst(s string) string {
	if s == "" || strings.ToUpper(s[:1]) != s[:1] || (len(s) > 1 && strings.ToUpper(s[1:2]) == s[1:2] && s[1] != ' ') {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
