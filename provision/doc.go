// Package provision runs a pool slot's provision, reset and health commands
// in-process through the mvdan.cc/sh/v3 shell interpreter.
//
// A pool file gives each command as shell text, for example
// "sh scripts/provision.sh --slot" or "createdb app && echo ok". [Run] parses
// that text, gives it the slot id as $1 and, when it is one command line,
// as the final argument of its last simple command (never of exit or
// return), and interprets it without starting a system shell, so the commands
// work on hosts that have neither bash nor sh. Builtins such as echo, test,
// printf, case and export run inside the current process; other programs
// (psql, redis-cli, sleep) are started as ordinary child processes.
//
// On Unix every external program is started in a process group of its own.
// When the context passed to [Run] is cancelled, the whole group receives
// SIGTERM and, after [Command.KillGrace], SIGKILL, so grandchildren that a
// program leaves behind are stopped too. Callers that want an interrupt from
// the terminal to reach those programs should cancel the context on SIGINT,
// for example with [os/signal.NotifyContext].
//
// Jobs that a script starts in the background with "&" and does not wait for
// keep running after [Run] returns, as they would under a real shell, and
// may still write to [Command.Stdout] and [Command.Stderr].
//
// The environment a command sees is built with [SlotEnv], which describes the
// slot as POOL_SLOT_* variables.
package provision
