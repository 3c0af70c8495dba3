// Package kongparse is the full command-line parser of pool and pool-run:
// kong, with the whole grammar's help and error messages. Importing it
// registers it with package cliparse. The lease executable does not (its
// whole grammar is read by cliparse.ParseAlone), so it never pays kong's
// package initialisation; internal/testkit/linkbudget holds it to that.
package kongparse

import (
	"fmt"
	"io"
	"slices"

	"github.com/alecthomas/kong"

	"github.com/durable-lease/durable-lease/internal/cli/cliparse"
)

func init() { cliparse.RegisterFull(Parse) }

// exitRequest carries kong's request to exit (after --help) out of Parse.
type exitRequest struct{ code int }

// Parse is cliparse's full parse, by kong's model of the whole grammar.
func Parse(grammar any, name, description string, vars map[string]string, args []string, stdout, stderr io.Writer) (cmd cliparse.Command, exited bool, status int, err error) {
	parser, err := kong.New(grammar,
		kong.Name(name),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitRequest{code}) }),
		kong.Vars(vars),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: true}),
	)
	if err != nil {
		return cliparse.Command{}, false, 0, fmt.Errorf("building the parser: %w", err)
	}
	hideUnread(parser.Model.Node, grammar, args)
	defer func() {
		if r := recover(); r != nil {
			ex, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			cmd, exited, status, err = cliparse.Command{}, true, ex.code, nil
		}
	}()
	kctx, err := parser.Parse(args)
	if err != nil {
		return cliparse.Command{}, false, 0, cliparse.Usagef("%v", err)
	}
	if sel := kctx.Selected(); sel != nil {
		cmd = cliparse.Command{Name: sel.Name, Target: sel.Target.Addr().Interface()}
	}
	return cmd, false, 0, nil
}

// hideUnread hides, in the help of the verb args name, the flags the
// grammar says that verb accepts but does not read ([cliparse.Unread]).
func hideUnread(root *kong.Node, grammar any, args []string) {
	u, ok := grammar.(cliparse.Unread)
	if !ok {
		return
	}
	verb := cliparse.VerbOf(grammar, args)
	if verb == "" {
		return
	}
	hide := u.UnreadFlags(verb)
	nodes := []*kong.Node{root}
	for _, c := range root.Children {
		if c.Name == verb {
			nodes = append(nodes, c)
		}
	}
	for _, n := range nodes {
		for _, f := range n.Flags {
			if slices.Contains(hide, f.Name) {
				f.Hidden = true
			}
		}
	}
}
