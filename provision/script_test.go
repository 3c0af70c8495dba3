package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// weirdIDs are slot ids that would break a command if they were pasted into
// its text instead of being added as a syntax-tree word.
var weirdIDs = []struct{ name, id string }{
	{"plain", "7"},
	{"spaces", "slot one  two"},
	{"command separator", "1; rm -rf /"},
	{"command substitution", "$(touch pwned)"},
	{"backticks", "`touch pwned`"},
	{"single quote", "it's"},
	{"quotes mixed", `'"'"'`},
	{"variables", "$HOME ${PATH} $1 $@ $$"},
	{"newlines", "a\nb\n\nc\n"},
	{"glob", "* ? [a-z]"},
	{"backslashes", `\ \\ \n \'`},
	{"leading dash", "-n"},
	{"tilde and braces", "~root {a,b}"},
	{"redirections and pipes", "> /tmp/x | cat & wait"},
	{"unicode", "slot-ü-日本"},
	{"all at once", "x' $(y) `z` \"w\"\n; echo pwned #"},
}

func TestRunSlotIDBuiltinPrintf(t *testing.T) {
	for _, tt := range weirdIDs {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var out bytes.Buffer
			err := Run(context.Background(), Command{
				Script: `printf '%s\n' --slot`,
				Dir:    dir,
				Env:    []string{"PATH=" + emptyDir(t)},
				SlotID: tt.id,
				Stdout: &out,
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if want := "--slot\n" + tt.id + "\n"; out.String() != want {
				t.Errorf("output = %q, want %q", out.String(), want)
			}
		})
	}
}

func TestRunSlotIDExternalProgram(t *testing.T) {
	for _, tt := range weirdIDs {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(context.Background(), Command{
				Script: `"$HELPER" args --slot`,
				Dir:    t.TempDir(),
				Env:    helperEnviron(t),
				SlotID: tt.id,
				Stdout: &out,
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			var args []string
			if err := json.Unmarshal(out.Bytes(), &args); err != nil {
				t.Fatalf("decoding %q: %v", out.String(), err)
			}
			if want := []string{"--slot", tt.id}; !slices.Equal(args, want) {
				t.Errorf("args = %q, want %q", args, want)
			}
		})
	}
}

func TestRunSlotIDPlacement(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"single command", `echo a`, "a ID\n"},
		{"right of and", `echo a && echo b`, "a\nb ID\n"},
		{"right of or", `false || echo b`, "b ID\n"},
		{"right of pipe", `echo a | echo b`, "b ID\n"},
		{"nested binary", `true && false || echo c`, "c ID\n"},
		{"redirection kept", `echo a >&1`, "a ID\n"},
		{"trailing comment", "echo a # comment", "a ID\n"},
		{"quoted script words", `echo 'x y' "$V"`, "x y v ID\n"},
		// A script of several statements is a script: nothing is glued to
		// its last command, and it reads the id as $1.
		{"statements after a semicolon", "echo a; echo b", "a\nb\n"},
		{"lines", "echo a\necho b", "a\nb\n"},
		{"several statements read $1", "f() { echo \"$# $1\"; }\nf \"$1\"", "1 ID\n"},
		{"one command reads $1 too", `echo "[$1]"`, "[ID] ID\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(context.Background(), Command{
				Script: tt.script,
				Env:    []string{"V=v"},
				SlotID: "ID",
				Stdout: &out,
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if out.String() != tt.want {
				t.Errorf("output = %q, want %q", out.String(), tt.want)
			}
		})
	}
}

// TestRunSlotIDInlineScript: an inline script ends with the status its
// author wrote, and a program still gets the id as its last argument.
func TestRunSlotIDInlineScript(t *testing.T) {
	tests := []struct {
		name, script string
		wantExit     int
		wantOut      string
	}{
		{"exit after a semicolon", "echo x; exit 3", 3, "x\n"},
		{"exit on its own", "exit 3", 3, ""},
		{"exit after and", "true && exit 4", 4, ""},
		{"return in a function", "f() { return 5; }\nf", 5, ""},
		{"lines ending in exit", "echo x\nexit 6", 6, "x\n"},
		{"status of the last of several statements", "echo \"$1\"; false", 1, "ID\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(context.Background(), Command{Script: tt.script, SlotID: "ID", Stdout: &out})
			var exit *ExitError
			if !errors.As(err, &exit) || exit.Status != tt.wantExit {
				t.Fatalf("Run = %v, want exit status %d", err, tt.wantExit)
			}
			if out.String() != tt.wantOut {
				t.Errorf("output = %q, want %q", out.String(), tt.wantOut)
			}
		})
	}
	t.Run("program after cd and", func(t *testing.T) {
		var out bytes.Buffer
		err := Run(context.Background(), Command{
			Script: `cd . && "$HELPER" args --slot`, Dir: t.TempDir(), Env: helperEnviron(t), SlotID: "ID", Stdout: &out,
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if want := `["--slot","ID"]`; strings.TrimSpace(out.String()) != want {
			t.Errorf("args = %s, want %s", out.String(), want)
		}
	})
}

func TestRunSyntax(t *testing.T) {
	tests := []struct {
		name, script, slotID string
		wantSyntax           bool
		wantMsg              string
	}{
		{"unclosed paren", `echo (`, "1", true, "1:1: `foo(` must be followed by `)`"},
		{"unterminated if", "if true; then echo", "1", true, "must end with"},
		{"unterminated quote", `echo 'x`, "", true, "reached EOF"},
		{"empty", "", "", true, "empty"},
		{"only comments", "# nothing\n\n", "1", true, "empty"},
		{"ends in if with id", "if true; then echo a; fi", "1", true, "if clause"},
		{"ends in subshell with id", "(echo a)", "1", true, "subshell"},
		{"ends in for loop with id", "for i in 1; do echo; done", "1", true, "for loop"},
		{"ends in function declaration with id", "f() { :; }", "1", true, "function"},
		{"binary ending in block with id", "true && { echo; }", "1", true, "block"},
		{"only an assignment with id", "FOO=bar", "1", true, "only assigns"},
		{"ends in if without id", "if true; then echo a; fi", "", false, ""},
		{"assignment without id", "FOO=bar", "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), Command{Script: tt.script, SlotID: tt.slotID})
			if !tt.wantSyntax {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Run error = %v, want ErrSyntax", err)
			}
			if !strings.HasPrefix(err.Error(), "provision: ") || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func FuzzSlotArg(f *testing.F) {
	for _, tt := range weirdIDs {
		f.Add(tt.id)
	}
	f.Add("")
	f.Add("\x00")
	f.Add("\xff\xfe")
	// The sourced file prints how many arguments it got, then the appended
	// one, as the example pool's ". ./provision.sh --slot" receives it.
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "count.sh"), []byte(`printf '%d:%s' "$#" "$2"`), 0o644); err != nil {
		f.Fatal(err)
	}
	const script = ". ./count.sh --slot"
	f.Fuzz(func(t *testing.T, id string) {
		var out bytes.Buffer
		err := Run(context.Background(), Command{Script: script, Dir: dir, SlotID: id, Stdout: &out})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := "2:" + id
		if id == "" { // nothing is appended
			want = "1:"
		}
		if out.String() != want {
			t.Errorf("output = %q, want %q", out.String(), want)
		}
	})
}
