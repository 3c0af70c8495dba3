package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/durable-lease/durable-lease/internal/cli/leasecli"
	"github.com/durable-lease/durable-lease/internal/cli/poolcli"
	"github.com/durable-lease/durable-lease/internal/cli/poolruncli"
	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
	"github.com/durable-lease/durable-lease/lease"
)

// mainFunc is the shape of every CLI's testable entry point.
type mainFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Commands are the CLIs the scripts run with `exec NAME ...`. Add a CLI by
// adding one line here.
var Commands = map[string]func(){
	"lease":    cli(leasecli.Main),
	"pool":     cli(poolcli.Main),
	"pool-run": func() { os.Exit(poolruncli.Process()) },
}

// cli runs main as a process would: arguments without the program name,
// the real stdout and stderr, a context cancelled by SIGINT or SIGTERM, and
// its result as the exit status. SIGHUP (a closed terminal) interrupts
// like SIGINT and SIGTERM.
func cli(main mainFunc) func() {
	return func() {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		code := main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
}

// leakyEnv are variables of the developer's shell that would change what
// the CLIs do. Scripts must never inherit them.
var leakyEnv = []string{"LEASE_STORE", "LEASE_OWNER_PATTERN", "LEASE_OWNER", "LEASE_POOL_FILE", "XDG_STATE_HOME", "LEASE_HOST_REGISTRY"}

// PoisonEnv sets, in this process, every variable of the developer's shell
// that would change what the CLIs do to a value that breaks every script,
// restoring them when t ends: if testscript ever passed this process's
// environment on, every script would fail (the pattern is not anchored,
// the store is not a directory).
func PoisonEnv(t *testing.T) {
	for _, name := range leakyEnv {
		old, had := os.LookupEnv(name)
		os.Setenv(name, "/dev/null/poisoned-by-clitest")
		t.Cleanup(func() {
			if had {
				os.Setenv(name, old)
			} else {
				os.Unsetenv(name)
			}
		})
	}
}

// Params runs the scripts in dir on the directory store: each script's
// environment is checked for leaked variables, the harness's commands are
// there, and the condition etcd is false.
func Params(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			for _, kv := range env.Vars {
				for _, name := range leakyEnv {
					if strings.HasPrefix(kv, name+"=") {
						return fmt.Errorf("script environment inherited %s", kv)
					}
				}
			}
			// The CLIs are this test binary: under -race each of its
			// exits would otherwise pause a second.
			env.Vars = append(env.Vars, testrun.RaceEnv())
			// pool-run's cgroups go in the test binary's scratch cgroup,
			// not in the real hierarchy.
			if v := os.Getenv(testrun.EnvCgroupParent); v != "" {
				env.Vars = append(env.Vars, testrun.EnvCgroupParent+"="+v)
			}
			// Each script's pools are claimed in a host registry of its
			// own, never the host's (/tmp), which a script may change.
			reg := filepath.Join(env.WorkDir, ".host-registry")
			if err := os.Mkdir(reg, 0o700); err != nil {
				return err
			}
			env.Vars = append(env.Vars, "LEASE_HOST_REGISTRY="+reg)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "etcd":
				return false, nil
			case "root":
				return os.Geteuid() == 0, nil
			case "cgroup":
				// pool-run can make cgroups here: the test binary made a
				// scratch one (root, or a delegated subtree). Under CI
				// it always can.
				if os.Getenv(testrun.EnvCgroupParent) == "" && os.Getenv("CI") == "true" {
					return false, fmt.Errorf("no writable cgroup v2 hierarchy (CI=true: the cgroup path must be tested)")
				}
				return os.Getenv(testrun.EnvCgroupParent) != "", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":     cmdExits,
			"onejson":   cmdOneJSON,
			"json":      cmdJSON,
			"jsonenv":   cmdJSONEnv,
			"jsondelta": cmdJSONDelta,
			"sleep":     cmdSleep,
			"await":     cmdAwait,
			"stamp":     cmdStamp,
			// snapshot writes what the store holds as the directory
			// store's files under $WORK/store, for the assertions that
			// read them; on the directory store they are there already.
			"snapshot": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 0 {
					ts.Fatalf("usage: snapshot")
				}
			},
		},
	}
}

// cmdExits runs a program like exec and asserts its exact exit status:
// exits N PROGRAM [ARGS...]. Its stdout and stderr are kept for the
// commands that follow, as exec keeps them.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits STATUS PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !exit.Exited() {
			ts.Fatalf("%s did not exit normally: %v", args[1], err)
		}
		got = exit.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// cmdStamp replaces @NOW@ in each named file with the current time as
// records store it, so a fixture can hold a live heartbeat: stamp FILE...
func cmdStamp(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: stamp FILE...")
	}
	now := lease.FormatTime(time.Now())
	for _, f := range args {
		path := ts.MkAbs(f)
		data, err := os.ReadFile(path)
		ts.Check(err)
		ts.Check(os.WriteFile(path, bytes.ReplaceAll(data, []byte("@NOW@"), []byte(now)), 0o644))
	}
}

// cmdSleep pauses the script: sleep DURATION.
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sleep DURATION")
	}
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	time.Sleep(d)
}

// awaitTimeout bounds an await: far beyond any wait a healthy run has, so
// only a real failure (the event never comes) reaches it, even on a host
// loaded by other work.
const awaitTimeout = 60 * time.Second

// cmdAwait waits for an event instead of sleeping for a guessed time:
// await [-timeout DURATION] PATTERN PROGRAM [ARGS...] runs PROGRAM again
// and again (it must only read) until its stdout matches the regular
// expression PATTERN, whatever its exit status, and keeps that run's
// stdout and stderr for the commands that follow, as exec does. It fails
// with the last output if the timeout (default 60s) passes first.
func cmdAwait(ts *testscript.TestScript, neg bool, args []string) {
	const usage = "usage: await [-timeout DURATION] PATTERN PROGRAM [ARGS...]"
	if neg {
		ts.Fatalf("unsupported: ! await")
	}
	timeout := awaitTimeout
	if len(args) >= 2 && args[0] == "-timeout" {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		timeout, args = d, args[2:]
	}
	if len(args) < 2 {
		ts.Fatalf(usage)
	}
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	deadline := time.Now().Add(timeout)
	pause := 10 * time.Millisecond
	for {
		err := ts.Exec(args[1], args[2:]...)
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			ts.Fatalf("await: %v", err)
		}
		out := ts.ReadFile("stdout")
		if re.MatchString(out) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("await: no match for %q from %s within %v; last stdout:\n%s\nlast stderr:\n%s",
				args[0], strings.Join(args[1:], " "), timeout, out, ts.ReadFile("stderr"))
		}
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// cmdOneJSON asserts stdout is exactly one JSON object followed by a
// newline: on one line, or indented over several with -pretty.
func cmdOneJSON(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! onejson")
	}
	pretty := false
	switch {
	case len(args) == 1 && args[0] == "-pretty":
		pretty = true
	case len(args) != 0:
		ts.Fatalf("usage: onejson [-pretty]")
	}
	out := ts.ReadFile("stdout")
	if _, err := oneObject(out); err != nil {
		ts.Fatalf("stdout: %v", err)
	}
	lines := strings.Count(out, "\n")
	switch {
	case !pretty && lines != 1:
		ts.Fatalf("stdout has %d lines, want exactly one JSON line", lines)
	case pretty && (lines < 3 || !strings.HasPrefix(out, "{\n  \"")):
		ts.Fatalf("stdout is not indented JSON:\n%s", out)
	}
}

// oneObject decodes text that must hold exactly one JSON object and end
// with a newline.
func oneObject(text string) (any, error) {
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("does not end with a newline: %q", text)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %v: %q", err, text)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("not a JSON object: %q", text)
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value: %q", text)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("trailing text after the JSON object: %q", rest)
	}
	return v, nil
}

// source parses the leading -in FILE and -line N options shared by json
// and jsonenv and returns the decoded document and the remaining args.
// Without -in it reads stdout, which must be exactly one JSON object. With
// -line N it reads line N (0-based; negative counts from the end) of a
// file of JSON lines such as reaped.log.
func source(ts *testscript.TestScript, args []string) (any, []string) {
	file, line, hasLine := "stdout", 0, false
	for len(args) >= 2 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		switch args[0] {
		case "-in":
			file = args[1]
		case "-line":
			n, err := strconv.Atoi(args[1])
			ts.Check(err)
			line, hasLine = n, true
		default:
			ts.Fatalf("unknown option %s", args[0])
		}
		args = args[2:]
	}
	text := ts.ReadFile(file)
	if hasLine {
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if line < 0 {
			line += len(lines)
		}
		if text == "" || line < 0 || line >= len(lines) {
			ts.Fatalf("%s has %d lines; no line %s", file, len(lines), strconv.Itoa(line))
		}
		text = lines[line] + "\n"
	}
	v, err := oneObject(text)
	if err != nil {
		ts.Fatalf("%s: %v", file, err)
	}
	return v, args
}

// cmdJSON asserts a field: json [-in FILE] [-line N] PATH [OP] [VALUE].
// A negated json still fails when the document is not one JSON object or
// the path is malformed; only the assertion itself is negated.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	doc, args := source(ts, args)
	if len(args) < 1 || len(args) > 3 {
		ts.Fatalf("usage: json [-in FILE] [-line N] PATH [OP] [VALUE]")
	}
	path := args[0]
	got, found, err := walk(doc, path)
	if err != nil {
		ts.Fatalf("%v", err)
	}
	var ok bool
	var what string
	switch len(args) {
	case 1:
		ok, what = found, "present"
	case 2:
		ok, what = found && equal(ts, got, args[1]), fmt.Sprintf("equal to %s", args[1])
	case 3:
		ok, what = found && compare(ts, got, args[1], args[2]), fmt.Sprintf("%s %s", args[1], args[2])
	}
	shown := "absent"
	if found {
		b, _ := json.Marshal(got)
		shown = string(b)
	}
	if ok == neg {
		not := ""
		if neg {
			not = "not "
		}
		ts.Fatalf("%s is %s, want %s%s", path, shown, not, what)
	}
	ts.Logf("%s is %s", path, shown)
}

// cmdJSONEnv stores a field in an environment variable: a string as it is,
// anything else as JSON. jsonenv [-in FILE] [-line N] NAME PATH.
func cmdJSONEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! jsonenv")
	}
	doc, args := source(ts, args)
	if len(args) != 2 {
		ts.Fatalf("usage: jsonenv [-in FILE] [-line N] NAME PATH")
	}
	got, found, err := walk(doc, args[1])
	if err != nil {
		ts.Fatalf("%v", err)
	}
	if !found {
		ts.Fatalf("%s is absent", args[1])
	}
	val, isString := got.(string)
	if !isString {
		b, _ := json.Marshal(got)
		val = string(b)
	}
	ts.Setenv(args[0], val)
}

// cmdJSONDelta asserts the time between two timestamp fields:
// jsondelta [-in FILE] [-line N] FROM TO MS means TO - FROM is MS
// milliseconds.
func cmdJSONDelta(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! jsondelta")
	}
	doc, args := source(ts, args)
	if len(args) != 3 {
		ts.Fatalf("usage: jsondelta [-in FILE] [-line N] FROM TO MS|MIN..MAX")
	}
	var at [2]time.Time
	for i, path := range args[:2] {
		v, found, err := walk(doc, path)
		if err != nil {
			ts.Fatalf("%v", err)
		}
		s, ok := v.(string)
		if !found || !ok {
			ts.Fatalf("%s is not a timestamp string", path)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			ts.Fatalf("%s: %v", path, err)
		}
		at[i] = t
	}
	// MS is exact, or an inclusive range MIN..MAX.
	lo, hi, isRange := strings.Cut(args[2], "..")
	min, err := strconv.ParseInt(lo, 10, 64)
	ts.Check(err)
	max := min
	if isRange {
		max, err = strconv.ParseInt(hi, 10, 64)
		ts.Check(err)
	}
	if got := at[1].Sub(at[0]).Milliseconds(); got < min || got > max {
		ts.Fatalf("%s - %s is %d ms, want %s", args[1], args[0], got, args[2])
	}
}

var pathStep = regexp.MustCompile(`^(?:\.([A-Za-z0-9_$-]+)|\[(\d+)\])`)

// walk follows a path such as .a.b, .a[0].b or "." through doc. found is
// false when a key or index is missing, or a step meets a value of another
// type; err reports a malformed path.
func walk(doc any, path string) (v any, found bool, err error) {
	if path == "." {
		return doc, true, nil
	}
	if !strings.HasPrefix(path, ".") {
		return nil, false, fmt.Errorf("path %q must start with '.'", path)
	}
	v, rest := doc, path
	for rest != "" {
		m := pathStep.FindStringSubmatch(rest)
		if m == nil {
			return nil, false, fmt.Errorf("bad path %q at %q", path, rest)
		}
		rest = rest[len(m[0]):]
		if m[1] != "" {
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, false, nil
			}
			if v, ok = obj[m[1]]; !ok {
				return nil, false, nil
			}
			continue
		}
		arr, ok := v.([]any)
		i, _ := strconv.Atoi(m[2])
		if !ok || i >= len(arr) {
			return nil, false, nil
		}
		v = arr[i]
	}
	return v, true, nil
}

// equal compares a string field with want literally and any other field
// with want read as JSON.
func equal(ts *testscript.TestScript, got any, want string) bool {
	if s, ok := got.(string); ok {
		return s == want
	}
	dec := json.NewDecoder(strings.NewReader(want))
	dec.UseNumber()
	var w any
	if err := dec.Decode(&w); err != nil {
		ts.Fatalf("%q is not a JSON value to compare with %v", want, got)
	}
	if gn, ok := got.(json.Number); ok {
		wn, ok := w.(json.Number)
		if !ok {
			return false
		}
		return number(ts, gn) == number(ts, wn)
	}
	return reflect.DeepEqual(normalize(got), normalize(w))
}

// normalize turns json.Numbers into float64 so DeepEqual compares values.
func normalize(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, _ := v.Float64()
		return f
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = normalize(v[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

func number(ts *testscript.TestScript, n json.Number) float64 {
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) {
		ts.Fatalf("%q is not a number", n)
	}
	return f
}

func compare(ts *testscript.TestScript, got any, op, arg string) bool {
	switch op {
	case "==":
		return equal(ts, got, arg)
	case "!=":
		return !equal(ts, got, arg)
	case "=~":
		re, err := regexp.Compile(arg)
		ts.Check(err)
		s, ok := got.(string)
		return ok && re.MatchString(s)
	case "type":
		return typeName(got) == arg
	case "len":
		want, err := strconv.Atoi(arg)
		ts.Check(err)
		switch g := got.(type) {
		case []any:
			return len(g) == want
		case map[string]any:
			return len(g) == want
		case string:
			return len(g) == want
		}
		return false
	case "<", "<=", ">", ">=":
		g, ok := got.(json.Number)
		if !ok {
			return false
		}
		a, b := number(ts, g), number(ts, json.Number(arg))
		switch op {
		case "<":
			return a < b
		case "<=":
			return a <= b
		case ">":
			return a > b
		}
		return a >= b
	}
	ts.Fatalf("unknown operator %q", op)
	return false
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
