package provision

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// parseScript parses script and, unless slotID is empty, appends slotID as
// the final argument of the script's command when the script is one
// command line (see [takesAppendedID]).
//
// All errors wrap [ErrSyntax].
func parseScript(script, slotID string) (*syntax.File, error) {
	file, err := syntax.NewParser().Parse(strings.NewReader(script), "")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if len(file.Stmts) == 0 {
		return nil, fmt.Errorf("%w: the command is empty", ErrSyntax)
	}
	if slotID == "" || len(file.Stmts) > 1 {
		// A script of several statements ("echo x; exit 3", or lines) is
		// a script, not a command line: an argument glued to its last
		// command would change what that command does. It reads the slot
		// id as $1 or $POOL_SLOT_ID instead.
		return file, nil
	}
	if err := appendArg(file, slotID); err != nil {
		return nil, err
	}
	return file, nil
}

// appendArg adds arg as the final argument of the last simple command in
// file. The argument is added to the syntax tree as a single-quoted word, so
// whatever it contains (quotes, "$(...)", ";", newlines) reaches the command
// as one literal argument and is never parsed as shell code.
func appendArg(file *syntax.File, arg string) error {
	call, err := lastCall(file.Stmts[len(file.Stmts)-1])
	if err != nil {
		return err
	}
	if !takesAppendedID(call) {
		return nil
	}
	call.Args = append(call.Args, &syntax.Word{
		Parts: []syntax.WordPart{&syntax.SglQuoted{Value: arg}},
	})
	return nil
}

// lastCall returns the simple command that runs last in stmt: stmt's own
// command if it is simple, or for "a && b", "a || b" and "a | b" the
// right-most command, found recursively.
func lastCall(stmt *syntax.Stmt) (*syntax.CallExpr, error) {
	switch cmd := stmt.Cmd.(type) {
	case *syntax.CallExpr:
		if len(cmd.Args) == 0 {
			// Only assignments, as in "FOO=bar": an appended word would
			// become the command name instead of an argument.
			return nil, fmt.Errorf("%w: the slot id cannot be appended to a command that only assigns variables", ErrSyntax)
		}
		return cmd, nil
	case *syntax.BinaryCmd:
		return lastCall(cmd.Y)
	case nil:
		return nil, fmt.Errorf("%w: the slot id cannot be appended: the command does not end in a simple command", ErrSyntax)
	default:
		return nil, fmt.Errorf("%w: the slot id cannot be appended to %s at %s; end the command with a simple command such as \"sh script.sh\"",
			ErrSyntax, describe(cmd), cmd.Pos())
	}
}

// takesAppendedID reports whether call may get the slot id as its last
// argument: every command but exit and return, whose argument is a
// status ("exit 3" with the id after it would fail instead of exiting 3).
// A command line such as "sh provision.sh --slot" or
// "cd scripts && ./provision.sh --slot" gets it, as the Node tool appends
// it (`sh -c '<command> "$1"'`).
func takesAppendedID(call *syntax.CallExpr) bool {
	switch call.Args[0].Lit() {
	case "exit", "return":
		return false
	}
	return true
}

// describe names the kind of a compound command for error messages.
func describe(cmd syntax.Command) string {
	switch cmd.(type) {
	case *syntax.IfClause:
		return "an if clause"
	case *syntax.WhileClause:
		return "a while or until loop"
	case *syntax.ForClause:
		return "a for loop"
	case *syntax.CaseClause:
		return "a case clause"
	case *syntax.Block:
		return "a { ... } block"
	case *syntax.Subshell:
		return "a ( ... ) subshell"
	case *syntax.FuncDecl:
		return "a function declaration"
	default:
		return fmt.Sprintf("a %T", cmd)
	}
}

// Check reports, as an error wrapping [ErrSyntax], a script that [Run]
// would refuse: one that does not parse, is empty, or, when takesSlotID,
// is one statement that does not end in a simple command the slot id can
// be appended to. Callers
// check their commands when they load them, before anything runs.
func Check(script string, takesSlotID bool) error {
	id := ""
	if takesSlotID {
		id = "slot"
	}
	_, err := parseScript(script, id)
	return err
}
