//go:build unix

package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// Statuses a shell reports when it cannot run a program.
const (
	statusNotExecutable = 126
	statusNotFound      = 127
)

// middleware is an interp.ExecHandlers middleware that replaces the
// interpreter's default exec handler with p.exec.
func (p *processes) middleware(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return p.exec
}

// exec is the interp.ExecHandlerFunc that runs the script's external
// programs.
//
// It works like interp.DefaultExecHandler: it looks the program up in the
// script's PATH, runs it with the script's directory, environment and
// standard streams, and turns its exit into an interp.ExitStatus. Unlike the
// default handler it starts each program in a new process group, which it
// records in p, and when ctx is cancelled it signals that whole group rather
// than only the program. It then reports ctx.Err() even if the program
// itself exited cleanly, so the cancellation is never mistaken for success.
func (p *processes) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	path, err := interp.LookPathDir(hc.Dir, hc.Env, args[0])
	if err != nil {
		fmt.Fprintln(hc.Stderr, err)
		return interp.ExitStatus(statusNotFound)
	}

	g, err := startGroup(ctx, hc, path, args, p.grace)
	if errors.Is(err, syscall.ENOEXEC) {
		// Like other shells, run a file the kernel will not execute,
		// such as a script without a "#!" line, as a shell script.
		return p.runScriptFile(ctx, hc, path, args)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintln(hc.Stderr, err)
		return interp.ExitStatus(statusNotExecutable)
	}
	p.add(g)

	err = g.cmd.Wait()
	if ctx.Err() != nil {
		// Run stops this group, and every other one, before it returns.
		return ctx.Err()
	}
	p.forgetIfEmpty(g)
	return exitStatus(err)
}

// startGroup starts the program at path in a process group of its own.
//
// A program whose file is being written by a process forked concurrently
// elsewhere may fail to start with ETXTBSY (https://go.dev/issue/22315);
// that state lasts only until the fork execs, so startGroup retries briefly.
func startGroup(ctx context.Context, hc interp.HandlerContext, path string, args []string, grace time.Duration) (*procGroup, error) {
	env := environList(hc.Env)
	for delay := time.Millisecond; ; delay *= 2 {
		g := newProcGroup(ctx, path, grace)
		g.cmd.Args = args
		g.cmd.Env = env
		g.cmd.Dir = hc.Dir
		g.cmd.Stdin = hc.Stdin
		g.cmd.Stdout = hc.Stdout
		g.cmd.Stderr = hc.Stderr
		err := g.cmd.Start()
		if !errors.Is(err, syscall.ETXTBSY) || delay >= 256*time.Millisecond {
			return g, err
		}
		time.Sleep(delay)
	}
}

// exitStatus converts the error of exec.Cmd.Wait for a program that was not
// cancelled into the error an exec handler returns.
func exitStatus(err error) error {
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		// ErrWaitDelay means the program exited with status 0 but a
		// process it left behind kept its output open; the program is done.
		return nil
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return err
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return interp.ExitStatus(128 + int(ws.Signal()))
	}
	return interp.ExitStatus(exitErr.ExitCode())
}

// runScriptFile interprets the file at path as a shell script with args[1:]
// as its positional parameters, in a new interpreter that shares the
// caller's directory, exported environment, standard streams and the
// record of started processes, but not its functions or unexported variables.
func (p *processes) runScriptFile(ctx context.Context, hc interp.HandlerContext, path string, args []string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(hc.Stderr, err)
		return interp.ExitStatus(statusNotExecutable)
	}
	if line, _, _ := bytes.Cut(src, []byte("\n")); bytes.IndexByte(line, 0) >= 0 {
		fmt.Fprintf(hc.Stderr, "%s: cannot execute binary file\n", args[0])
		return interp.ExitStatus(statusNotExecutable)
	}
	file, err := syntax.NewParser().Parse(bytes.NewReader(src), args[0])
	if err != nil {
		fmt.Fprintln(hc.Stderr, err)
		return interp.ExitStatus(2) // what bash reports for a syntax error
	}
	runner, err := interp.New(
		interp.Dir(hc.Dir),
		interp.Env(expand.ListEnviron(environList(hc.Env)...)),
		interp.StdIO(hc.Stdin, hc.Stdout, hc.Stderr),
		interp.ExecHandlers(p.middleware),
	)
	if err != nil {
		return err
	}
	runner.Params = args[1:]
	return runner.Run(ctx, file)
}

// environList returns the exported string variables of env as "NAME=value"
// strings, for a program's environment. A name listed more than once keeps
// its last value, and a name whose last entry is unset is left out.
func environList(env expand.Environ) []string {
	index := make(map[string]int)
	var list []string
	for name, vr := range env.Each {
		i, seen := index[name]
		if !vr.IsSet() || !vr.Exported || vr.Kind != expand.String {
			if seen {
				list[i] = ""
			}
			continue
		}
		kv := name + "=" + vr.String()
		if seen {
			list[i] = kv
			continue
		}
		index[name] = len(list)
		list = append(list, kv)
	}
	out := list[:0]
	for _, kv := range list {
		if kv != "" {
			out = append(out, kv)
		}
	}
	return out
}
