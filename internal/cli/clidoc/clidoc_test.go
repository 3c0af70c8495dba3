package clidoc

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/durable-lease/durable-lease/internal/testkit/testrun"
)

func TestMain(m *testing.M) { testrun.Main(m) }

// root is the checkout, two directories up from this package's.
const root = "../../.."

// TestShareIsUpToDate: share/ holds exactly what the grammars render now,
// so the man pages and completions the archives and the npm package
// install are those of the commands they ship with.
func TestShareIsUpToDate(t *testing.T) {
	want, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	err = filepath.WalkDir(filepath.Join(root, "share"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	stale := false
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s is missing or out of date", name)
			stale = true
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s is not generated any more", name)
			stale = true
		}
	}
	if stale {
		t.Log("run go generate ./internal/cli/clidoc")
	}
}

// TestEveryVerbAndFlag: each verb and each flag a command's help lists is
// in its man page and in each of its completions.
func TestEveryVerbAndFlag(t *testing.T) {
	progs, err := programs()
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		for _, file := range []string{"share/man/man1/" + p.name + ".1", "share/bash-completion/completions/" + p.name,
			"share/zsh/site-functions/_" + p.name, "share/fish/vendor_completions.d/" + p.name + ".fish"} {
			text := string(files[file])
			if strings.HasSuffix(file, ".1") {
				text = strings.ReplaceAll(text, `\-`, "-")
			}
			var words []string
			for _, f := range p.flags {
				words = append(words, f.name)
			}
			for _, v := range p.verbs {
				words = append(words, v.name)
				for _, f := range v.flags {
					words = append(words, f.name)
				}
			}
			for _, w := range words {
				if !strings.Contains(text, w) {
					t.Errorf("%s: no %s", file, w)
				}
			}
		}
	}
	// The verbs the help hides are not offered.
	if bash := string(files["share/bash-completion/completions/pool"]); strings.Contains(bash, "\twaiter)") || strings.Contains(bash, " waiter ") {
		t.Error("pool's bash completion offers the hidden verb waiter")
	}
}

// TestBashCompletes sources each bash completion into a real bash and
// drives its function as bash does on TAB (COMP_WORDS, COMP_CWORD), with
// the cursor at the end of each line below.
func TestBashCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		testrun.Missing(t, "bash is not installed (apt-get install bash)")
	}
	dir := t.TempDir()
	for _, d := range []string{"store/sub", "pools"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "pools", "db.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string
		want []string // exactly, in order; or, with some, at least these
		some bool
	}{
		{line: "lease acq", want: []string{"acquire"}},
		{line: "pool-run --po", want: []string{"--pool", "--poll-ms"}},
		{line: "lease ", want: []string{"acquire", "heartbeat", "release", "status", "reap", "list", "reconcile", "version"}},
		{line: "lease acquire --k", want: []string{"--kind"}},
		{line: "lease --pretty acquire --wait", want: []string{"--wait-ms"}},
		{line: "lease --store store status --k", want: []string{"--kind"}},
		{line: "lease --store=store status --k", want: []string{"--kind"}},
		{line: "lease --kind ", want: nil}, // a value no shell can guess
		{line: "lease --store st", want: []string{"store"}},
		{line: "lease --store=st", want: []string{"store"}},
		{line: "pool re", want: []string{"request", "reset", "release", "reprovision"}},
		// Only the verbs that run a command take its override.
		{line: "pool acquire --pro", want: []string{"--provision-cmd"}},
		{line: "pool status --pro", want: nil},
		{line: "pool --pool po", want: []string{"pools"}},
		{line: "pool enqueue --mode ", want: []string{"blocking", "async"}},
		{line: "pool-run --containment ", want: []string{"auto", "cgroup", "tree"}},
		{line: "pool-run --pool pools/d", want: []string{"pools/db.json"}},
		// From the command's first word, the words are the command's.
		{line: "pool-run --kind b ba", want: []string{"bash"}, some: true},
		{line: "pool-run --kind b -- ba", want: []string{"bash"}, some: true},
		{line: "pool-run --kind b true --po", want: nil},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got := completeBash(t, bash, dir, tc.line)
			if tc.some {
				for _, w := range tc.want {
					if !slices.Contains(got, w) {
						t.Errorf("%q completes to %q, without %q", tc.line, got, w)
					}
				}
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%q completes to %q, want %q", tc.line, got, tc.want)
			}
		})
	}
}

// completeBash is what the completion of line's command offers, the
// cursor at its end, in bash running in dir.
func completeBash(t *testing.T, bash, dir, line string) []string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	// bash splits a word at "=" (COMP_WORDBREAKS) before it calls the
	// function: --store=st is "--store" "=" "st".
	var split []string
	for _, w := range words {
		if name, value, ok := strings.Cut(w, "="); ok && strings.HasPrefix(w, "--") {
			split = append(split, name, "=", value)
			continue
		}
		split = append(split, w)
	}
	file, err := filepath.Abs(filepath.Join(root, "share", "bash-completion", "completions", words[0]))
	if err != nil {
		t.Fatal(err)
	}
	// The function the completion registered for the command, as
	// complete -p shows it, run as bash runs it on TAB.
	script := `set -u
source "$1"; shift
spec=$(complete -p "$1") || exit 1
fn=${spec#*-F }; fn=${fn%% *}
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE=$LINE; COMP_POINT=${#LINE}
"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	cmd := exec.Command(bash, append([]string{"--noprofile", "--norc", "-c", script, "bash", file}, split...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LINE="+line)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%q: %v\n%s", line, err, out)
	}
	var got []string
	for _, w := range strings.Split(string(out), "\n") {
		if w != "" {
			got = append(got, w)
		}
	}
	return got
}

// TestManPagesRender renders each man page with man -l, as man(1) shows
// it, and checks that groff had nothing to warn about and that the page
// has its sections.
func TestManPagesRender(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		testrun.Missing(t, "man is not installed (apt-get install man-db)")
	}
	progs, err := programs()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		t.Run(p.name, func(t *testing.T) {
			page := filepath.Join(root, "share", "man", "man1", p.name+".1")
			cmd := exec.Command("man", "--warnings", "-l", page)
			cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat", "LC_ALL=C.UTF-8")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("man -l %s: %v\n%s", page, err, stderr.String())
			}
			if stderr.Len() > 0 {
				t.Errorf("man -l %s warned:\n%s", page, stderr.String())
			}
			text := strings.Join(strings.Fields(stdout.String()), " ") // as filled, justified
			sections := []string{"NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO", p.name + " - " + lowerFirst(p.summary())[:20]}
			if len(p.verbs) > 0 {
				sections = append(sections, "COMMANDS", p.name+" "+p.verbs[0].name)
			}
			for _, want := range sections {
				if !strings.Contains(text, want) {
					t.Errorf("the page has no %q:\n%s", want, text)
				}
			}
			for _, f := range p.flags {
				if !strings.Contains(text, "--"+f.name) {
					t.Errorf("the page has no --%s", f.name)
				}
			}
		})
	}
}

// TestZshLoads: compinit, given share/zsh/site-functions on fpath,
// registers each completion for its command, and each parses.
func TestZshLoads(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		testrun.Missing(t, "zsh is not installed (apt-get install zsh)")
	}
	dir, err := filepath.Abs(filepath.Join(root, "share", "zsh", "site-functions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lease", "pool", "pool-run"} {
		if out, err := exec.Command(zsh, "-n", filepath.Join(dir, "_"+name)).CombinedOutput(); err != nil {
			t.Errorf("zsh -n _%s: %v\n%s", name, err, out)
		}
	}
	cmd := exec.Command(zsh, "-f", "-c", `fpath=("$1" $fpath); autoload -U compinit; compinit -u -d "$2/zcompdump"; print -r -- $_comps[lease] $_comps[pool] $_comps[pool-run]`, "zsh", dir, t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_lease _pool _pool-run" {
		t.Errorf("compinit registered %q (%v), want _lease _pool _pool-run", out, err)
	}
}

// TestFishCompletes asks a real fish what it completes, with the
// completions loaded from share/.
func TestFishCompletes(t *testing.T) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		testrun.Missing(t, "fish is not installed (apt-get install fish)")
	}
	dir, err := filepath.Abs(filepath.Join(root, "share", "fish", "vendor_completions.d"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"lease acq", []string{"acquire"}},
		{"lease acquire --k", []string{"--kind"}},
		{"pool-run --po", []string{"--poll-ms", "--pool"}},
		{"pool-run --containment ", []string{"auto", "cgroup", "tree"}},
		{"pool status --pro", nil},
		{"pool acquire --pro", []string{"--provision-cmd"}},
	} {
		name := strings.Fields(tc.line)[0]
		cmd := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, filepath.Join(dir, name+".fish"), tc.line)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if w, _, _ := strings.Cut(l, "\t"); w != "" {
				got = append(got, w)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("fish completes %q to %q, want %q", tc.line, got, tc.want)
		}
	}
}
