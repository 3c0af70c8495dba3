// Package clidoc renders the man pages and the bash, zsh and fish
// completions of lease, pool and pool-run from the grammars their command
// lines are parsed by (the kong structs of internal/cli/leasecli, poolcli and
// poolruncli), so that neither can drift from what the commands accept.
// go generate ./internal/cli/clidoc writes them under share/ (gen.go), as the
// archives and the npm package install them; TestShareIsUpToDate fails
// until it has run after a change of a grammar.
//
// The completions are static scripts: a shell reads them without running
// the command, so lease, which links no kong, needs nothing at run time,
// and a TAB costs no process start.
package clidoc

import (
	"fmt"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
	"github.com/durable-lease/durable-lease/internal/cli/leasecli"
	"github.com/durable-lease/durable-lease/internal/cli/poolcli"
	"github.com/durable-lease/durable-lease/internal/cli/poolruncli"
)

// valueKind is what a flag's value is, for completing it.
type valueKind int

const (
	noValue  valueKind = iota // a boolean flag
	anyValue                  // a word the shell cannot guess (a kind, a token)
	fileValue
	dirValue
	wordValue // one of words
)

// flag is one flag as the renderers see it.
type flag struct {
	name        string
	short       rune
	help        string
	placeholder string // "" for a boolean flag
	kind        valueKind
	words       []string // for wordValue
	envs        []string
}

// verb is one visible verb with the flags it takes.
type verb struct {
	name, help string
	// flags are every flag the verb's help lists: the root's and its
	// own, less the ones it does not read (cliparse.Unread).
	flags []flag
	// own are those of flags the root's help does not list.
	own []flag
}

// program is one command's grammar, read from its kong model.
type program struct {
	name        string
	description string
	flags       []flag // the root's, as its help lists them
	verbs       []verb
	// runsCommand is pool-run's shape: after its flags come the words
	// of the command it runs.
	runsCommand bool
}

// summary is the description's first sentence, on one line, up to a
// colon or a semicolon: the man page's NAME line.
func (p *program) summary() string {
	text := strings.Join(strings.Fields(p.description), " ")
	if i := strings.IndexAny(text, ".:;"); i >= 0 {
		text = text[:i]
	}
	return text
}

// programs are the three commands, in the order the pages list them.
func programs() ([]*program, error) {
	var out []*program
	for _, g := range []struct {
		name    string
		grammar func() (any, string, map[string]string)
	}{
		{"lease", leasecli.Grammar},
		{"pool", poolcli.Grammar},
		{"pool-run", poolruncli.Grammar},
	} {
		grammar, description, vars := g.grammar()
		p, err := read(g.name, grammar, description, vars)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// read builds a program from its grammar as the parsers see it: kong's
// model, with the flags each verb's help hides (cliparse.Unread) left out.
func read(name string, grammar any, description string, vars map[string]string) (*program, error) {
	parser, err := kong.New(grammar, kong.Name(name), kong.Description(description), kong.Vars(vars))
	if err != nil {
		return nil, err
	}
	unread := func(string) []string { return nil }
	if u, ok := grammar.(cliparse.Unread); ok {
		unread = u.UnreadFlags
	}
	root := parser.Model.Node
	p := &program{name: name, description: description, flags: flags(root.Flags, unread(""))}
	for _, a := range root.Positional {
		if a.PassthroughMode != 0 {
			p.runsCommand = true
		}
	}
	for _, c := range root.Children {
		if c.Hidden || c.Type != kong.CommandNode {
			continue
		}
		if len(c.Children) > 0 || len(c.Positional) > 0 {
			return nil, fmt.Errorf("verb %s has verbs or arguments of its own, which clidoc does not render", c.Name)
		}
		hidden := unread(c.Name)
		v := verb{name: c.Name, help: c.Help, flags: flags(slices.Concat(root.Flags, c.Flags), hidden)}
		for _, f := range v.flags {
			if !slices.ContainsFunc(p.flags, func(g flag) bool { return g.name == f.name }) {
				v.own = append(v.own, f)
			}
		}
		p.verbs = append(p.verbs, v)
	}
	return p, nil
}

// flags are the visible ones of fs, less those named in hidden.
func flags(fs []*kong.Flag, hidden []string) []flag {
	var out []flag
	for _, f := range fs {
		if f.Hidden || slices.Contains(hidden, f.Name) {
			continue
		}
		g := flag{name: f.Name, short: f.Short, help: f.Help, envs: f.Envs}
		if !f.IsBool() {
			g.placeholder = f.FormatPlaceHolder()
			g.kind = anyValue
			switch {
			case f.Enum != "":
				g.kind, g.words = wordValue, f.EnumSlice()
			case strings.Contains(g.placeholder, "|"):
				g.kind, g.words = wordValue, strings.Split(g.placeholder, "|")
			case g.placeholder == "FILE":
				g.kind = fileValue
			case g.placeholder == "DIR":
				g.kind = dirValue
			}
		}
		out = append(out, g)
	}
	return out
}

// Files are the generated files by their path under the checkout: each
// command's man page and its completions for bash, zsh and fish, where
// those shells (and man) look for them under a prefix such as /usr/local
// or ~/.local.
func Files() (map[string][]byte, error) {
	progs, err := programs()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, p := range progs {
		out["share/man/man1/"+p.name+".1"] = []byte(man(p, progs))
		out["share/bash-completion/completions/"+p.name] = []byte(bash(p))
		out["share/zsh/site-functions/_"+p.name] = []byte(zsh(p))
		out["share/fish/vendor_completions.d/"+p.name+".fish"] = []byte(fish(p))
	}
	return out, nil
}

// generated is the first comment line of every completion script.
func generated(p *program, shell string) string {
	return fmt.Sprintf("%s completion for %s, generated from its grammar by internal/cli/clidoc (go generate ./internal/cli/clidoc); do not edit.", shell, p.name)
}
