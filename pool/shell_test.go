package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// nastyValues are values a grant env may carry that a naive quoter would
// let the shell interpret.
var nastyValues = []struct {
	name, value string
}{
	{"empty", ""},
	{"plain", "postgresql://acme:acme@localhost:5432/acme_test_1"},
	{"single quote", "it's"},
	{"only quotes", "'''"},
	{"quote at ends", "'x'"},
	{"double quotes", `say "hi"`},
	{"command substitution", "$(touch x)"},
	{"backticks", "`touch x`"},
	{"variable", "$HOME ${PATH} $1 $$ $?"},
	{"quote breakout", "'; touch x; echo '"},
	{"escaped quote breakout", `\'; touch x; '`},
	{"semicolon", "a; touch x"},
	{"pipe and redirect", "a | tee x > x"},
	{"newlines", "line1\nline2\n"},
	{"trailing newlines", "v\n\n\n"},
	{"carriage return", "a\r\nb\r"},
	{"tab", "a\tb"},
	{"backslashes", `C:\path\to\n\\`},
	{"trailing backslash", `x\`},
	{"glob", "* ? [a-z] ~"},
	{"brace expansion", "{a,b} {1..3}"},
	{"history", "!! !$"},
	{"unicode", "héllo wörld ✓ 日本語 🚀"},
	{"ansi-c looking", "$'\\x41'"},
	{"hash", "# not a comment"},
	{"control chars", "\x01\x07\x1b[31m"},
	{"equals", "a=b=c"},
	{"dash", "-n"},
}

// shellVar is the variable each case exports; the other exports are the
// grant's trailers.
const shellVar = "GRANT_VALUE"

func exportsFor(t testing.TB, value string) string {
	t.Helper()
	out, err := ShellExports(map[string]string{shellVar: value, "OTHER": "o"}, "POOL_LEASE", "1", "tok$(touch x)", "own`touch x`er")
	if err != nil {
		t.Fatalf("ShellExports: %v", err)
	}
	return out
}

// evalMvdan evaluates script with the mvdan.cc/sh interpreter in dir and
// returns the shell variables afterwards and what the script printed.
func evalMvdan(t testing.TB, dir, script string) (map[string]expand.Variable, string) {
	t.Helper()
	file, err := syntax.NewParser().Parse(strings.NewReader(script), "")
	if err != nil {
		t.Fatalf("parse %q: %v", script, err)
	}
	var out, errb bytes.Buffer
	r, err := interp.New(interp.Dir(dir), interp.StdIO(nil, &out, &errb), interp.Env(expand.ListEnviron()))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), file); err != nil {
		t.Fatalf("run %q: %v (stderr %q)", script, err, errb.String())
	}
	return r.Vars, out.String()
}

func assertNoFile(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("the eval created %q", e.Name())
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", "''"},
		{"abc", "'abc'"},
		{"it's", `'it'"'"'s'`},
		{"'", `''"'"''`},
		{"$(x)", "'$(x)'"},
	}
	for _, tc := range tests {
		if got := ShellQuote(tc.in); got != tc.want {
			t.Errorf("ShellQuote(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestShellExportsFormat(t *testing.T) {
	t.Parallel()
	got, err := ShellExports(map[string]string{"B": "2", "A": "1"}, "POOL_LEASE", "3", "tok", "ci-main")
	if err != nil {
		t.Fatal(err)
	}
	want := "export A='1'\nexport B='2'\nexport POOL_LEASE_SLOT='3'\nexport POOL_LEASE_TOKEN='tok'\nexport POOL_LEASE_OWNER='ci-main'\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	t.Run("nil env", func(t *testing.T) {
		got, err := ShellExports(nil, "P", "1", "t", "o")
		if err != nil || got != "export P_SLOT='1'\nexport P_TOKEN='t'\nexport P_OWNER='o'\n" {
			t.Errorf("got %q, %v", got, err)
		}
	})
}

func TestShellExportsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                       string
		env                        map[string]string
		prefix, slot, token, owner string
	}{
		{"NUL in an env value", map[string]string{"A": "a\x00b"}, "P", "1", "t", "o"},
		{"NUL alone", map[string]string{"A": "\x00"}, "P", "1", "t", "o"},
		{"NUL in the token", nil, "P", "1", "t\x00", "o"},
		{"NUL in the owner", nil, "P", "1", "t", "\x00"},
		{"bad env name", map[string]string{"A B": "x"}, "P", "1", "t", "o"},
		{"env name injection", map[string]string{"A=1; touch x; B": "x"}, "P", "1", "t", "o"},
		{"bad prefix", nil, "1P", "1", "t", "o"},
		{"prefix injection", nil, "P;touch x;P", "1", "t", "o"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ShellExports(tc.env, tc.prefix, tc.slot, tc.token, tc.owner)
			if err == nil {
				t.Fatalf("no error; output %q", out)
			}
			if out != "" {
				t.Errorf("partial output %q on error", out)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("err %v does not match ErrConfig", err)
			}
		})
	}
}

// mvdanLimit names a value that mvdan.cc/sh v3.14.1 cannot carry through
// ShellExports' quoting, or "" when it can: its parser turns \r\n into \n
// even inside single quotes, which no quoting can avoid.
func mvdanLimit(value string) string {
	if strings.Contains(value, "\r\n") {
		return "the mvdan parser drops \\r before \\n inside single quotes"
	}
	return ""
}

func TestShellExportsRoundTripMvdan(t *testing.T) {
	t.Parallel()
	for _, tc := range nastyValues {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			script := exportsFor(t, tc.value)
			vars, out := evalMvdan(t, dir, script+`printf %s "$`+shellVar+`"`)
			assertNoFile(t, dir)
			for name, want := range map[string]string{"OTHER": "o", "POOL_LEASE_SLOT": "1", "POOL_LEASE_TOKEN": "tok$(touch x)", "POOL_LEASE_OWNER": "own`touch x`er"} {
				if got := vars[name]; !got.Exported || got.String() != want {
					t.Errorf("%s = %+v, want exported %q", name, got, want)
				}
			}
			got := vars[shellVar]
			if (got.String() != tc.value || out != tc.value) && mvdanLimit(tc.value) != "" {
				t.Skipf("known mvdan limit: %s: got %q, want %q", mvdanLimit(tc.value), got.String(), tc.value)
			}
			if !got.Exported || got.String() != tc.value {
				t.Errorf("var = %+v (%q), want exported %q", got, got.String(), tc.value)
			}
			if out != tc.value {
				t.Errorf("printf printed %q, want %q", out, tc.value)
			}
		})
	}
}

func TestShellExportsRoundTripBash(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	for _, tc := range nastyValues {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// eval, as the gate pattern does: eval "$(pool acquire --shell)".
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", `eval "$EXPORTS"; printf %s "$`+shellVar+`"; printf '\0%s' "$POOL_LEASE_TOKEN" "$POOL_LEASE_OWNER"`)
			cmd.Dir = dir
			cmd.Env = []string{"EXPORTS=" + exportsFor(t, tc.value), "PATH=" + os.Getenv("PATH")}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("bash: %v (stderr %q)", err, stderr.String())
			}
			parts := strings.Split(string(out), "\x00")
			if len(parts) != 3 || parts[0] != tc.value || parts[1] != "tok$(touch x)" || parts[2] != "own`touch x`er" {
				t.Errorf("bash printed %q, want %q then the token and owner", parts, tc.value)
			}
			assertNoFile(t, dir)
		})
	}
	t.Run("source from a file", func(t *testing.T) {
		dir := t.TempDir()
		var script strings.Builder
		env := map[string]string{}
		for i, tc := range nastyValues {
			env[fmt.Sprintf("V%d", i)] = tc.value
		}
		exports, err := ShellExports(env, "POOL_LEASE", "1", "t", "o")
		if err != nil {
			t.Fatal(err)
		}
		script.WriteString(exports)
		for i := range nastyValues {
			fmt.Fprintf(&script, "printf '%%s\\0' \"$V%d\"\n", i)
		}
		file := filepath.Join(t.TempDir(), "exports.sh")
		if err := os.WriteFile(file, []byte(script.String()), 0o666); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bash, "--norc", "--noprofile", file)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if len(got) != len(nastyValues) {
			t.Fatalf("got %d values, want %d", len(got), len(nastyValues))
		}
		for i, tc := range nastyValues {
			if got[i] != tc.value {
				t.Errorf("%s: got %q, want %q", tc.name, got[i], tc.value)
			}
		}
		assertNoFile(t, dir)
	})
}

func FuzzShellExports(f *testing.F) {
	for _, tc := range nastyValues {
		f.Add(tc.value)
	}
	f.Add("\xff\xfe invalid utf-8")
	f.Add("\x00")
	f.Fuzz(func(t *testing.T, value string) {
		out, err := ShellExports(map[string]string{shellVar: value}, "POOL_LEASE", "1", "t", "o")
		if strings.ContainsRune(value, 0) {
			if err == nil {
				t.Fatalf("a NUL byte was accepted: %q", out)
			}
			return
		}
		if err != nil {
			t.Fatalf("ShellExports(%q): %v", value, err)
		}
		if !utf8.ValidString(value) {
			// The mvdan parser refuses input that is not UTF-8; bash
			// (checked in the table test) does not.
			t.Skip("invalid UTF-8")
		}
		dir := t.TempDir()
		vars, printed := evalMvdan(t, dir, out+`printf %s "$`+shellVar+`"`)
		assertNoFile(t, dir)
		if mvdanLimit(value) != "" {
			t.Skip(mvdanLimit(value))
		}
		if got := vars[shellVar].String(); got != value {
			t.Fatalf("round trip: got %q, want %q", got, value)
		}
		if printed != value {
			t.Fatalf("printf printed %q, want %q", printed, value)
		}
	})
}
