package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// exportNames are the variables shellScript exports, in order.
var exportNames = []string{"A", "B", "P_SLOT", "P_TOKEN", "P_OWNER"}

// shellScript is what --shell prints for a grant whose every value is
// built from value: the env A and B, then the slot, token and owner.
func shellScript(value string) (map[string]string, string, error) {
	want := map[string]string{"A": value, "B": "'" + value + "'", "P_SLOT": "1", "P_TOKEN": value, "P_OWNER": "o" + value}
	out, err := ShellExports(map[string]string{"A": want["A"], "B": want["B"]}, "P", want["P_SLOT"], want["P_TOKEN"], want["P_OWNER"])
	return want, out, err
}

// literalWord returns the text of a word made only of single-quoted and
// double-quoted literals, and false for a word with anything the shell
// would expand or run (parameters, command or arithmetic substitution,
// globs, unquoted text).
func literalWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false // $'…' is not POSIX
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, in := range p.Parts {
				lit, ok := in.(*syntax.Lit)
				if !ok || strings.ContainsAny(lit.Value, "$`\\") {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// checkExportScript parses script as POSIX shell and checks that it is
// exactly one `export NAME=<quoted literal>` per line, for names in order,
// with nothing else a shell would do; it returns the values the parser
// reads.
func checkExportScript(t *testing.T, script string, names []string) map[string]string {
	t.Helper()
	file, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(script), "")
	if err != nil {
		t.Fatalf("parse %q: %v", script, err)
	}
	if len(file.Stmts) != len(names) || len(file.Last) != 0 {
		t.Fatalf("%d statements (trailing comments %v), want %d: %q", len(file.Stmts), file.Last, len(names), script)
	}
	got := map[string]string{}
	for i, st := range file.Stmts {
		if st.Negated || st.Background || st.Coprocess || st.Disown || len(st.Redirs) != 0 || len(st.Comments) != 0 {
			t.Fatalf("statement %d is not a plain command: %q", i, script)
		}
		// In the POSIX variant export is a plain command: the word
		// "export", then one word of a literal NAME= and quoted literals.
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(call.Assigns) != 0 || len(call.Args) != 2 || call.Args[0].Lit() != "export" {
			t.Fatalf("statement %d is %T, not one export: %q", i, st.Cmd, script)
		}
		arg := call.Args[1]
		if len(arg.Parts) == 0 {
			t.Fatalf("statement %d: empty export argument: %q", i, script)
		}
		name, ok := arg.Parts[0].(*syntax.Lit)
		if !ok || name.Value != names[i]+"=" {
			t.Fatalf("statement %d is not export %s=value: %q", i, names[i], script)
		}
		v, ok := literalWord(&syntax.Word{Parts: arg.Parts[1:]})
		if !ok {
			t.Fatalf("the value of %s is not a quoted literal: %q", names[i], script)
		}
		got[names[i]] = v
	}
	return got
}

// runMvdanStrict evaluates script with the mvdan.cc/sh interpreter and
// fails on any command, builtin or not, and any file it would open.
func runMvdanStrict(t *testing.T, script string) map[string]expand.Variable {
	t.Helper()
	file, err := syntax.NewParser().Parse(strings.NewReader(script), "")
	if err != nil {
		t.Fatalf("parse %q: %v", script, err)
	}
	var ran []string
	r, err := interp.New(
		interp.Env(expand.ListEnviron()),
		interp.StdIO(nil, io.Discard, io.Discard),
		interp.CallHandler(func(_ context.Context, args []string) ([]string, error) {
			ran = append(ran, strings.Join(args, " "))
			return args, errors.New("no command may run")
		}),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
			return func(_ context.Context, args []string) error {
				ran = append(ran, "exec "+strings.Join(args, " "))
				return errors.New("no command may run")
			}
		}),
		interp.OpenHandler(func(_ context.Context, path string, _ int, _ os.FileMode) (io.ReadWriteCloser, error) {
			ran = append(ran, "open "+path)
			return nil, errors.New("no file may be opened")
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), file); err != nil || len(ran) != 0 {
		t.Fatalf("evaluating %q ran %q (%v)", script, ran, err)
	}
	return r.Vars
}

// FuzzShellQuote: for any value, the --shell lines that carry it (as an
// env value, quoted inside another, as the token and the owner) are
// refused if it holds a NUL, and otherwise are exactly five POSIX
// `export NAME='…'` statements whose words are quoted literals, which the
// mvdan.cc/sh interpreter evaluates without running a command or opening a
// file, giving back exactly the value. TestShellExportsBashDash replays
// this corpus through bash and dash.
func FuzzShellQuote(f *testing.F) {
	for _, tc := range nastyValues {
		f.Add(tc.value)
	}
	f.Fuzz(func(t *testing.T, value string) {
		want, script, err := shellScript(value)
		if strings.ContainsRune(value, 0) {
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "NUL") || script != "" {
				t.Fatalf("a value with a NUL byte: %q, %v; want no output and an ErrConfig naming the NUL", script, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("ShellExports: %v", err)
		}
		if !utf8.ValidString(value) {
			t.Skip("the mvdan parser refuses text that is not UTF-8; TestShellExportsBashDash covers it")
		}
		for _, v := range want {
			if mvdanLimit(v) != "" {
				t.Skip(mvdanLimit(v))
			}
		}
		parsed := checkExportScript(t, script, exportNames)
		vars := runMvdanStrict(t, script)
		for _, name := range exportNames {
			if parsed[name] != want[name] {
				t.Fatalf("%s parses as %q, want %q", name, parsed[name], want[name])
			}
			if v := vars[name]; !v.Exported || v.String() != want[name] {
				t.Fatalf("%s = %+v (%q), want exported %q", name, v, v.String(), want[name])
			}
		}
	})
}

// corpusStrings reads the string values of a fuzz target's checked-in
// corpus (files of one string(…) line).
func corpusStrings(t *testing.T, target string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "string(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s: not a one-string corpus file: %q", file, data)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		t.Fatalf("no corpus for %s", target)
	}
	return out
}

// nastyGenerated are values built to break quoting: every byte but NUL
// alone and between quotes, runs of quotes and backslashes, invalid
// UTF-8, long values, and random strings over shell metacharacters.
func nastyGenerated() []string {
	var out []string
	for c := 1; c < 256; c++ {
		b := string([]byte{byte(c)})
		out = append(out, b, "'"+b+"'", `"`+b+`"`, "x"+b+"$(printf pwned)"+b)
	}
	for n := 1; n <= 4; n++ {
		out = append(out, strings.Repeat("'", n), strings.Repeat(`\`, n), strings.Repeat(`'\`, n), strings.Repeat("\n", n), strings.Repeat("\r\n", n))
	}
	out = append(out,
		"\xff", "\xc3", "\xed\xa0\x80", "a\x80b", // not UTF-8
		"EOF\nEOF", "'\nexport PATH=/tmp\n'", "';printf pwned;'", "'\"'\"'",
		"${PATH?pwned}", "$((1+1))", "$(printf pwned)", "`printf pwned`", "<(printf pwned)", "a&&printf pwned",
		"-", "--", "-e", "\\'", "\\", "=", "~root", "*", "[", "!", "\x7f",
		strings.Repeat("'$(x)`y`\\\n", 2000), // about 20 KiB
		strings.Repeat("é'", 40000),          // about 120 KiB, past one env string's limit
	)
	rng := rand.New(rand.NewPCG(8, 7))
	const alphabet = "'\"\\$`(){}[]<>|&;*?~!#=% \t\n\r-abcxyz0é🚀"
	runes := []rune(alphabet)
	for range 300 {
		var b strings.Builder
		for range rng.IntN(40) {
			if rng.IntN(10) == 0 {
				b.WriteByte(byte(1 + rng.IntN(255)))
			} else {
				b.WriteRune(runes[rng.IntN(len(runes))])
			}
		}
		out = append(out, b.String())
	}
	return out
}

// shellOwnVars are the variables the test or the shell itself puts in
// the environment env(1) prints.
var shellOwnVars = map[string]bool{"PATH": true, "LC_ALL": true, "EXPORTS": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

// externalShell finds a shell by name; it is missing only outside CI.
func externalShell(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed, and CI=true requires the round trip through it", name)
		}
		t.Skipf("%s is not installed: the --shell round trip through it is not checked (CI=true makes this a failure)", name)
	}
	return path
}

// TestShellExportsBashDash evaluates the --shell lines of the seed
// corpora, the nasty values and a generated set through bash and dash,
// many values per shell: sourced from a file, and with eval "$(…)" as the
// gate pattern does. Each shell must export exactly every value and run
// nothing else: PATH holds only env(1), which prints the environment, so
// any other command would fail with "not found" on stderr, and the working
// directory must stay empty.
func TestShellExportsBashDash(t *testing.T) {
	t.Parallel()
	values := map[string]bool{}
	for _, tc := range nastyValues {
		values[tc.value] = true
	}
	for _, target := range []string{"FuzzShellQuote", "FuzzShellExports"} {
		for _, v := range corpusStrings(t, target) {
			values[v] = true
		}
	}
	for _, v := range nastyGenerated() {
		values[v] = true
	}
	var list []string
	for v := range values {
		if strings.ContainsRune(v, 0) {
			if _, err := ShellExports(map[string]string{"V": v}, "P", "1", "t", "o"); err == nil {
				t.Errorf("a value with a NUL byte was accepted: %q", v)
			}
			continue
		}
		list = append(list, v)
	}
	sort.Strings(list)

	envPath, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(envPath, filepath.Join(bin, "env")); err != nil {
		t.Fatal(err)
	}

	// batches split the values so that one batch's exports fit in one
	// environment string (128 KiB on Linux) for the eval form; a longer
	// value goes alone, and only through a file.
	const maxBatch = 96 << 10
	type batch struct {
		env     map[string]string
		exports string
	}
	var batches []batch
	cur := batch{env: map[string]string{}}
	size := 0
	flush := func() {
		if len(cur.env) == 0 {
			return
		}
		out, err := ShellExports(cur.env, "POOL_LEASE", "1", "tok$(printf pwned)", "own`printf pwned`er")
		if err != nil {
			t.Fatal(err)
		}
		cur.exports = out
		batches = append(batches, cur)
		cur, size = batch{env: map[string]string{}}, 0
	}
	for i, v := range list {
		line := len("export V=''\n") + len(strconv.Itoa(i)) + len(ShellQuote(v))
		if size+line > maxBatch {
			flush()
		}
		cur.env[fmt.Sprintf("V%d", i)] = v
		size += line
	}
	flush()
	t.Logf("%d values in %d batches", len(list), len(batches))

	type run struct{ shell, locale string }
	var runs []run
	for _, sh := range []string{"bash", "dash"} {
		for _, loc := range []string{"C", "C.UTF-8"} {
			runs = append(runs, run{sh, loc})
		}
	}
	for _, r := range runs {
		t.Run(r.shell+"/"+r.locale, func(t *testing.T) {
			shell := externalShell(t, r.shell)
			probe := exec.Command(shell, "-c", ":")
			probe.Env = []string{"PATH=" + bin, "LC_ALL=" + r.locale}
			if out, err := probe.CombinedOutput(); err != nil || len(out) != 0 {
				t.Skipf("locale %s is not usable here (%v: %q); the other locale still runs", r.locale, err, out)
			}
			args := func(script string) []string {
				if r.shell == "bash" {
					return []string{"--norc", "--noprofile", script}
				}
				return []string{script}
			}
			evals := 0
			for bi, b := range batches {
				for _, mode := range []string{"source", "eval"} {
					if mode == "eval" && len("EXPORTS=")+len(b.exports)+1 > 128<<10 {
						continue // too long for one environment string
					}
					dir := t.TempDir()
					scriptDir := t.TempDir()
					script := filepath.Join(scriptDir, "run.sh")
					body := b.exports + "env -0\n"
					if mode == "eval" {
						body = `eval "$(printf '%s\n' "$EXPORTS")"` + "\nenv -0\n"
					}
					if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
					cmd := exec.Command(shell, args(script)...)
					cmd.Dir = dir
					cmd.Env = []string{"PATH=" + bin, "LC_ALL=" + r.locale}
					if mode == "eval" {
						cmd.Env = append(cmd.Env, "EXPORTS="+b.exports)
					}
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					if err := cmd.Run(); err != nil || stderr.Len() != 0 {
						t.Fatalf("batch %d, %s: %v; stderr %q", bi, mode, err, stderr.String())
					}
					got := map[string]string{}
					for _, kv := range strings.Split(strings.TrimSuffix(stdout.String(), "\x00"), "\x00") {
						k, v, _ := strings.Cut(kv, "=")
						got[k] = v
					}
					want := map[string]string{"POOL_LEASE_SLOT": "1", "POOL_LEASE_TOKEN": "tok$(printf pwned)", "POOL_LEASE_OWNER": "own`printf pwned`er"}
					for k, v := range b.env {
						want[k] = v
					}
					for k, v := range want {
						if g, ok := got[k]; !ok || g != v {
							t.Errorf("batch %d, %s: %s = %q (set: %v), want %q", bi, mode, k, g, ok, v)
						}
					}
					// Nothing else is exported, and PATH is untouched.
					for k := range got {
						if _, ok := want[k]; !ok && !shellOwnVars[k] {
							t.Errorf("batch %d, %s: %s was exported too", bi, mode, k)
						}
					}
					if got["PATH"] != bin {
						t.Errorf("batch %d, %s: PATH became %q", bi, mode, got["PATH"])
					}
					if mode == "eval" {
						evals++
					}
					if entries, _ := os.ReadDir(dir); len(entries) != 0 {
						t.Errorf("batch %d, %s: the shell created %v", bi, mode, entries)
					}
				}
			}
			if evals == 0 {
				t.Error("no batch was small enough for the eval form")
			}
		})
	}
}
