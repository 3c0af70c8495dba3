package provision

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunExitStatus(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   int // 0 means success
	}{
		{"builtin true", "true", 0},
		{"builtin false", "false", 1},
		{"exit builtin", "exit 3", 3},
		{"status of last command", "false; true", 0},
		{"errexit stops early", "set -e; false; exit 9", 1},
		{"without errexit continues", "false; exit 9", 9},
		{"external success", `"$HELPER" exit 0`, 0},
		{"external failure", `"$HELPER" exit 7`, 7},
		{"external high status", `"$HELPER" exit 200`, 200},
		{"external status in and-list", `"$HELPER" exit 4 && true`, 4},
		{"command not found", "no-such-program-anywhere", 127},
		{"not executable", "./plain.txt", 127},
		{"script without shebang", "./noshebang", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "plain.txt"), "hello\n", 0o644)
			writeFile(t, filepath.Join(dir, "noshebang"), "echo \"$1\" >&2\nexit 5\n", 0o755)
			err := Run(context.Background(), Command{Script: tt.script, Dir: dir, Env: helperEnviron(t)})
			if tt.want == 0 {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			var exitErr *ExitError
			if !errors.As(err, &exitErr) || !errors.Is(err, ErrFailed) {
				t.Fatalf("Run error = %v, want an *ExitError wrapping ErrFailed", err)
			}
			if exitErr.Status != tt.want {
				t.Errorf("status = %d, want %d", exitErr.Status, tt.want)
			}
			if want := "provision: command failed: exit status "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

func TestRunOutput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), Command{
		Script: `echo builtin-out; echo builtin-err >&2; "$HELPER" getenv GREETING; "$HELPER" stderr external-err`,
		Env:    helperEnviron(t, "GREETING=hello"),
		Stdout: &stdout,
		Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := stdout.String(), "builtin-out\nhello\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := stderr.String(), "builtin-err\nexternal-err\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

func TestRunNilWriters(t *testing.T) {
	err := Run(context.Background(), Command{
		Script: `echo discarded; "$HELPER" stderr discarded`,
		Env:    helperEnviron(t),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestRunDir(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "marker"), "", 0o644)
	tests := []struct{ name, script, want string }{
		{"builtin pwd", "pwd", dir + "\n"},
		{"external program", `"$HELPER" pwd`, dir + "\n"},
		{"relative test", "test -f marker && echo found", "found\n"},
		{"relative redirection", `echo written > out.txt && read line < out.txt && echo "$line"`, "written\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Run(context.Background(), Command{Script: tt.script, Dir: dir, Env: helperEnviron(t), Stdout: &out}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if out.String() != tt.want {
				t.Errorf("output = %q, want %q", out.String(), tt.want)
			}
		})
	}
}

func TestRunMissingDir(t *testing.T) {
	err := Run(context.Background(), Command{Script: "true", Dir: filepath.Join(t.TempDir(), "missing")})
	if err == nil || errors.Is(err, ErrFailed) || errors.Is(err, ErrSyntax) {
		t.Fatalf("Run error = %v, want a plain setup error", err)
	}
}

// TestRunBuiltinsOnly runs a provisioner that uses only shell builtins with
// PATH set to an empty directory: no sh, bash or coreutils are needed.
func TestRunBuiltinsOnly(t *testing.T) {
	const script = `set -e
name="db_${POOL_SLOT_ID}"
export DATABASE="$name"
if [ "$POOL_ACTION" = provision ] && test -n "$POOL_SLOT_PORTS_API"; then
	case "$POOL_SLOT_KIND" in
	pg|postgres) echo "create $DATABASE on $POOL_SLOT_PORTS_API" ;;
	*) echo "unknown kind" >&2; exit 3 ;;
	esac
fi
printf '%s|' "$@" done`
	env := append([]string{"PATH=" + emptyDir(t)}, SlotEnv(Slot{
		ID: "4", Kind: "pg", Attributes: map[string]any{"ports": map[string]any{"api": 3000.0}},
	}, ActionProvision)...)
	var out bytes.Buffer
	if err := Run(context.Background(), Command{Script: script, Env: env, SlotID: "4", Stdout: &out}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// A script of several lines gets the id as $1, and nothing appended.
	if got, want := out.String(), "create db_4 on 3000\n4|done|"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}

	err := Run(context.Background(), Command{Script: "sh -c true", Env: env})
	var exitErr *ExitError
	if !errors.As(err, &exitErr) || exitErr.Status != 127 {
		t.Errorf("running sh with an empty PATH: err = %v, want exit status 127", err)
	}
}

func TestRunContextAlreadyDone(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"deadline passed", expired, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := Run(tt.ctx, Command{Script: `echo ran > ran.txt; "$HELPER" exit 0`, Dir: dir, Env: helperEnviron(t)})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run error = %v, want %v", err, tt.want)
			}
			if errors.Is(err, ErrFailed) {
				t.Errorf("a cancelled run must not look like a failed command: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran.txt")); err == nil {
				t.Errorf("the script ran although its context was done")
			}
		})
	}
}

// writeFile writes data to name with mode perm, failing the test on error.
func writeFile(t *testing.T, name, data string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}
